"""One worker of a two-worker job on loopback (TF_CONFIG set by test_distributed), run as
`stop_vote.py`: votes once with `AnyWorkerTerminated` and prints what it decided.

Worker 1's record gets SIGTERM while the vote runs (after the vote has read it); the chief's
gets none. Both must decide alike: no stop now (the signal counts at the next vote).
"""

import signal

from bert_tf.training import distribution
from bert_tf.training.termination import AnyWorkerTerminated


class SignalDuringTheVote:
    """A `recording_stop_signals` record whose signal arrives once it has been read."""

    def __init__(self):
        self.reads = 0

    @property
    def signum(self):
        self.reads += 1
        return None if self.reads == 1 else signal.SIGTERM

    def __bool__(self):
        return self.signum is not None


class NoSignal:
    signum = None

    def __bool__(self):
        return False


def main():
    strategy = distribution.create_strategy("multi_worker_mirrored", quiet=True)
    record = NoSignal() if distribution.is_chief(strategy) else SignalDuringTheVote()
    print(f"decided: {AnyWorkerTerminated(strategy)(record)}", flush=True)
    distribution.wait_for_every_worker(strategy, "voted")


if __name__ == "__main__":
    main()
