"""Serves a SavedModel over TF Serving's gRPC and REST APIs, for local use.

Clients written for `tensorflow_model_server` work unchanged: gRPC `PredictionService`
(Predict, Classify, Regress, GetModelMetadata) and `ModelService.GetModelStatus` on --port, REST
`/v1/models/<name>[/versions/<v>][:predict|:classify|:regress|/metadata]` on --rest_api_port.
Serves the newest version under --model_base_path (`<base>/<version>/saved_model.pb`) and picks
up new versions without a restart (a base path with none yet gets a warning, and is served
once one appears). Flags are tensorflow_model_server's where it has them.
Requests beyond the workers and --max_queued_requests, or beyond --max_inflight_request_bytes
of request and answer data in progress, are refused at once (RESOURCE_EXHAUSTED, HTTP 503).

Example:
    bert-tf-serve --model_base_path=/tmp/export/bert_sst2
    curl -d '{"instances": ["a gripping film"]}' localhost:8501/v1/models/bert_sst2:predict
    curl -d '{"examples": [{"text": "a gripping film"}]}' localhost:8501/v1/models/bert_sst2:classify
"""

import signal
import threading

from absl import flags, logging

from bert_tf.cli.app import run_tool
from bert_tf.cli.thread_pool_flags import define_thread_pool_flags

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string("model_base_path", None, "Directory holding one subdirectory per version: "
                        "<model_base_path>/<version>/saved_model.pb.")
    flags.DEFINE_string("model_name", "", "Name clients use for the model; default: the base "
                        "path's directory name.")
    flags.DEFINE_string("host", "127.0.0.1", "Address to bind both ports to; 0.0.0.0 exposes the "
                        "server to the network.")
    flags.DEFINE_integer("port", 8500, "gRPC port (0 picks a free one).", lower_bound=0,
                         upper_bound=65535)
    flags.DEFINE_integer("rest_api_port", 8501, "REST port; 0 turns the REST API off, as in "
                         "tensorflow_model_server.", lower_bound=0, upper_bound=65535)
    flags.DEFINE_integer("max_batch_size", 32, "Most sequences one batch runs: a request's "
                         "rows, or the strings of an input when more (rows x choices; a SQuAD "
                         "question counts its export's max_windows); a request with more is "
                         "refused, except that this package's task exports, which run in slices, "
                         "take up to this many strings.", lower_bound=1)
    flags.DEFINE_integer("batch_timeout_micros", 2000, "Longest a request waits for others to "
                         "share its batch.", lower_bound=0)
    flags.DEFINE_integer("num_batch_threads", 1, "Batches run at once; a batch that closes while "
                         "others are idle is shared out among them.", lower_bound=1)
    define_thread_pool_flags("With --num_batch_threads, keep their product at the number of "
                             "cores.")
    flags.DEFINE_integer("max_request_bytes", 16 << 20, "Largest request body accepted (gRPC "
                         "message or REST body).", lower_bound=1)
    flags.DEFINE_float("file_system_poll_wait_seconds", 1.0, "Interval between looks for new "
                       "versions; 0 looks once, at startup.", lower_bound=0)
    flags.DEFINE_integer("max_queued_requests", 64, "gRPC requests that may wait for a worker, "
                         "or REST connections open beyond the workers (idle ones are closed to "
                         "make room); more are refused at once.", lower_bound=0)
    flags.DEFINE_integer("max_inflight_request_bytes", 256 << 20, "Request and answer data that "
                         "requests in progress may hold together (a REST answer counts its JSON "
                         "at its longest, 25 bytes a float); more is refused at once (bounds the "
                         "server's memory).", lower_bound=1)
    flags.mark_flag_as_required("model_base_path")


def main():
    from bert_tf.serving import ModelServer, ServerOptions

    options = ServerOptions(
        model_base_path=FLAGS.model_base_path, model_name=FLAGS.model_name, host=FLAGS.host,
        port=FLAGS.port, rest_api_port=FLAGS.rest_api_port or None,
        max_batch_size=FLAGS.max_batch_size, batch_timeout_micros=FLAGS.batch_timeout_micros,
        num_batch_threads=FLAGS.num_batch_threads,
        tensorflow_intra_op_parallelism=FLAGS.tensorflow_intra_op_parallelism,
        tensorflow_inter_op_parallelism=FLAGS.tensorflow_inter_op_parallelism,
        max_request_bytes=FLAGS.max_request_bytes,
        file_system_poll_wait_seconds=FLAGS.file_system_poll_wait_seconds,
        max_queued_requests=FLAGS.max_queued_requests,
        max_inflight_request_bytes=FLAGS.max_inflight_request_bytes)
    server = ModelServer(options)
    server.start()

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    rest = (f"REST at http://{options.host}:{server.rest_api_port}/v1/models/{options.model_name}"
            if server.rest_api_port else "REST off")
    # One parseable line: scripts started with --port=0 read the ports from it.
    print(f"Serving model '{options.model_name}' from {options.model_base_path}: "
          f"gRPC at {options.host}:{server.port}, {rest}", flush=True)
    stop.wait()
    logging.info("Shutting down")
    server.stop()
    return 0


def run():
    run_tool(main, define_flags, timestamped_logs=True)
