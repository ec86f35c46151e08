import threading

from bert_tf.layers.portable_graphs import portable_graphs, portable_graphs_enabled
from bert_tf.layers.real_tokens import real_tokens_only, real_tokens_only_enabled
from bert_tf.layers.trace_scope import TraceScope


def test_blocks_nest_and_restore():
    scope = TraceScope()
    assert not scope.active()
    with scope.entered():
        with scope.entered():
            assert scope.active()
        assert scope.active()
    assert not scope.active()


def test_restored_after_an_exception():
    scope = TraceScope()
    try:
        with scope.entered():
            raise RuntimeError("traced function failed")
    except RuntimeError:
        pass
    assert not scope.active()


def test_only_the_entering_thread_sees_it():
    scope = TraceScope()
    seen = []
    with scope.entered():
        thread = threading.Thread(target=lambda: seen.append(scope.active()))
        thread.start()
        thread.join()
        assert scope.active()
    assert seen == [False]


def test_the_package_scopes_are_independent():
    with real_tokens_only():
        assert real_tokens_only_enabled() and not portable_graphs_enabled()
    with portable_graphs():
        assert portable_graphs_enabled() and not real_tokens_only_enabled()
