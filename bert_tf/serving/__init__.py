"""A TF-Serving-compatible endpoint for local use: `tools/serve.py` is its command line.

Example:
    >>> from bert_tf.serving import ModelServer, ServerOptions
    >>> server = ModelServer(ServerOptions(model_base_path="/models/bert_sst2"))
    >>> server.start()   # gRPC on 127.0.0.1:8500, REST on 127.0.0.1:8501
"""

from bert_tf.serving.errors import ServingError
from bert_tf.serving.model_server import ModelServer, ServerOptions

__all__ = ["ModelServer", "ServerOptions", "ServingError"]
