"""One worker of a two-worker job on loopback (TF_CONFIG set by test_distributed), run as
`every_worker_wait.py MARKER wait|leave`.

Both create the multi-worker strategy and run one all-reduce. Worker 1 then either calls
`wait_for_every_worker` and writes MARKER after it (`wait`), or exits at once (`leave`). The
chief (worker 0) sleeps, prints whether MARKER exists yet, then calls `wait_for_every_worker`
itself and prints "passed".
"""

import os
import sys
import time

import tensorflow as tf

from bert_tf.training import distribution

CHIEF_DELAY_SECONDS = 2


def main(marker, mode):
    strategy = distribution.create_strategy("multi_worker_mirrored", quiet=True)
    total = strategy.reduce(tf.distribute.ReduceOp.SUM,
                            strategy.run(lambda: tf.constant(1.0)), axis=None)
    print(f"replicas {int(total.numpy())}", flush=True)
    if not distribution.is_chief(strategy):
        if mode == "wait":
            distribution.wait_for_every_worker(strategy, "test")
            open(marker, "w").close()
        return
    time.sleep(CHIEF_DELAY_SECONDS)
    print(f"marker before the chief's wait: {os.path.exists(marker)}", flush=True)
    distribution.wait_for_every_worker(strategy, "test")
    print("passed", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
