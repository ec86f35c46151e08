"""Real TFDS data dirs for the tests, prepared offline once per session from ../shared/data by
`bert_tf.data.tfds.local_preparation` (the catalog's builders pointed at the local files).

Whole splits: preparing all of SST-2 (67,349 + 872 examples) takes about 3 s, SQuAD v1.1 dev
about 5 s and CoNLL-2003 train + valid about 4 s on 2 cores (measured under load).

Example (a fixture in a test module):
    data_dir = prepared_data_dir(tmp_path_factory, "glue/sst2", "SST-2")
"""

from bert_tf.data.tfds.local_preparation import prepare_local
from tests.resources import shared_data_path

_PREPARED = {}


def prepared_data_dir(tmp_path_factory, tfds_name, shared_directory):
    """A TFDS data dir holding `tfds_name` prepared from `../shared/data/<shared_directory>`
    (once per session; skips without the shared data)."""
    source = shared_data_path(shared_directory)
    if tfds_name not in _PREPARED:
        data_dir = str(tmp_path_factory.mktemp("tfds"))
        prepare_local(tfds_name, source, data_dir)
        _PREPARED[tfds_name] = data_dir
    return _PREPARED[tfds_name]
