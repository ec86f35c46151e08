"""What goes wrong with a checkpoint path before its weights meet a model.

(A checkpoint that does not fit the model is `loading.CheckpointMismatchError`.)

Example:
    >>> try:
    ...     read_weights("download/model.safetensors")
    ... except UnsupportedCheckpointError as error:   # DamagedCheckpointError included
    ...     sys.exit(f"convert_checkpoint: {error}")
"""


class UnsupportedCheckpointError(ValueError):
    """The path exists but holds no checkpoint this package can read safely."""


class DamagedCheckpointError(UnsupportedCheckpointError):
    """A checkpoint file exists but its contents are truncated or corrupt."""
