"""`ModelManager`: keeps the newest version under a model base path loaded, as TF Serving does.

The layout is TF Serving's: `<model_base_path>/<version>/saved_model.pb`, versions being
integers. The directory is polled every `file_system_poll_wait_seconds`; a newer version is
loaded beside the current one and swapped in only once loaded, so the model never stops
answering, and the old version is unloaded after its in-flight requests finish. Best write a
new version elsewhere and rename it into the base path: a directory still being copied in
(`cp -r`) may fail to load; a version that failed is tried again once its files change (the
copy went on), as TF Serving retries a failed load. A directory named like a number that is
no version (`010`, one beyond int64) is ignored with a warning.

Example:
    >>> manager = ModelManager("toy", "/models/toy", max_batch_size=32, batch_timeout_micros=1000,
    ...                        num_batch_threads=1, file_system_poll_wait_seconds=1)
    >>> manager.start()
    >>> with manager.servable("toy") as servable:
    ...     servable.version
    2
    >>> manager.stop()
"""

import contextlib
import logging
import os
import threading

import grpc
import tensorflow as tf
from tensorflow_serving.apis import get_model_status_pb2

from bert_tf.serving.errors import ServingError
from bert_tf.serving.servable import Servable
from bert_tf_hub_names import SAVED_MODEL_FILE, saved_model_versions, version_numbers

_State = get_model_status_pb2.ModelVersionStatus.State


class ModelManager:
    """Loads, swaps and looks up the versions of one model; reports their states."""

    def __init__(self, model_name, model_base_path, max_batch_size, batch_timeout_micros,
                 num_batch_threads, file_system_poll_wait_seconds):
        self.model_name = model_name
        self.model_base_path = model_base_path
        self._servable_options = {"max_batch_size": max_batch_size,
                                  "batch_timeout_micros": batch_timeout_micros,
                                  "num_batch_threads": num_batch_threads}
        self._poll_wait = file_system_poll_wait_seconds
        self._current = None
        self._states = {}  # version -> (state, status code, message), as ServableStateMonitor
        self._failed = {}  # version -> its files as they were when it failed to load
        self._warned_names = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._poller = None

    def start(self):
        """Loads the newest version now, then polls for new ones in the background (never when
        `file_system_poll_wait_seconds` is 0, as in TF Serving). With no version on disk yet it
        warns and waits for one, as TF Serving does, unless none can come: when nothing polls,
        or when the base path is a version directory itself (FileNotFoundError)."""
        on_disk = self._versions_on_disk()
        if not on_disk:
            self._no_version_yet()
        self._serve_newest(on_disk)
        if self._poll_wait > 0:
            self._poller = threading.Thread(target=self._poll, name="version-poller", daemon=True)
            self._poller.start()

    def stop(self):
        """Stops polling and unloads the served version once its requests finish."""
        self._stopping.set()
        if self._poller is not None:
            self._poller.join()
        with self._lock:
            current, self._current = self._current, None
        if current is not None:
            self._retire(current)

    def poll_once(self):
        """Serves the newest version on disk: loads it if it is new, unloads what it replaces."""
        self._serve_newest(self._versions_on_disk())

    def _serve_newest(self, on_disk):
        """Serves the newest of `on_disk` ({version: directory}, as _versions_on_disk) that
        loads, of those newer than the one served (all of them when none is: a server whose
        newest version is broken starts on the one before)."""
        current = self._current
        if not on_disk:
            if current is not None:
                with self._lock:
                    self._current = None
                self._retire(current)
            return
        for version in sorted(on_disk, reverse=True):
            if current is not None and version <= current.version:
                return
            servable = self._load(version, on_disk[version])
            if servable is not None:
                break
        else:
            return
        with self._lock:
            replaced, self._current = self._current, servable
            self._states[version] = (_State.AVAILABLE, grpc.StatusCode.OK, "")
        logging.info("Serving version %d of model '%s'", version, self.model_name)
        if replaced is not None:
            self._retire(replaced)

    def _load(self, version, directory):
        """The version's `Servable`, or None if it fails to load (recorded in its state), or
        failed before and its files are as they were then."""
        files = _files_of(directory)
        if version in self._failed:
            if self._failed[version] == files:
                return None
            logging.info("Version %d of model '%s' changed since it failed to load: trying "
                         "again", version, self.model_name)
        self._set_state(version, _State.LOADING)
        logging.info("Loading version %d of model '%s' from %s", version, self.model_name,
                     directory)
        try:
            servable = Servable(directory, version, **self._servable_options)
        except Exception as error:  # noqa: BLE001 -- a bad version must not stop the server
            self._failed[version] = files
            code = (ServingError.from_tf_error(error).code if isinstance(error, tf.errors.OpError)
                    else grpc.StatusCode.UNKNOWN)
            self._set_state(version, _State.END, code,
                            f"Failed to load version {version}: {error}")
            logging.error("Version %d of model '%s' failed to load: %s", version,
                          self.model_name, error)
            return None
        self._failed.pop(version, None)
        return servable

    @contextlib.contextmanager
    def servable(self, name, version=None, version_label=""):
        """Holds the servable a request's ModelSpec names (the newest when `version` is None)
        for the duration of the `with` block; NOT_FOUND when there is none."""
        if version_label:
            raise ServingError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Unrecognized servable version label: {version_label}. This server assigns no "
                f"labels; request a version number or the latest version.")
        with self._lock:
            servable = self._current
            if (name != self.model_name or servable is None
                    or (version is not None and version != servable.version)):
                request = f"Latest({name})" if version is None else f"Specific({name}, {version})"
                serving = (f"version {servable.version} of model '{self.model_name}'"
                           if servable is not None else "no version yet")
                raise ServingError(grpc.StatusCode.NOT_FOUND,
                                   f"Servable not found for request: {request}. "
                                   f"This server serves {serving}.")
            servable.acquire()
        try:
            yield servable
        finally:
            servable.release()

    def status(self, name, version=None):
        """The GetModelStatusResponse for `name` (every version seen, newest first, or one)."""
        with self._lock:
            states = dict(self._states) if name == self.model_name else {}
        if version is not None:
            if version not in states:
                raise ServingError(grpc.StatusCode.NOT_FOUND,
                                   f"Could not find version {version} of model {name}")
            states = {version: states[version]}
        elif not states:
            raise ServingError(grpc.StatusCode.NOT_FOUND,
                               f"Could not find any versions of model {name}")
        response = get_model_status_pb2.GetModelStatusResponse()
        for number in sorted(states, reverse=True):
            state, code, message = states[number]
            entry = response.model_version_status.add(version=number, state=state)
            entry.status.error_code = code.value[0]
            entry.status.error_message = message
        return response

    def _poll(self):
        while not self._stopping.wait(self._poll_wait):
            self.poll_once()

    def _versions_on_disk(self):
        try:
            versions = saved_model_versions(self.model_base_path)
        except OSError as error:
            logging.warning("Cannot list model base path %s: %s", self.model_base_path, error)
            return {}
        self._warn_about_names_that_are_no_versions()
        return {version: os.path.join(self.model_base_path, str(version))
                for version in versions}

    def _warn_about_names_that_are_no_versions(self):
        """Warns once of each directory named by digits that is not a version: one a user
        meant as a version would otherwise be ignored without a word."""
        try:
            names = os.listdir(self.model_base_path)
        except OSError:
            return
        for name in names:
            if (name.isascii() and name.isdigit() and name not in self._warned_names
                    and not version_numbers([name])
                    and os.path.isdir(os.path.join(self.model_base_path, name))):
                self._warned_names.add(name)
                logging.warning("Ignoring %s: not a version number (versions are positive "
                                "integers below 2**63, written without leading zeros)",
                                os.path.join(self.model_base_path, name))

    def _no_version_yet(self):
        base = self.model_base_path
        if (os.path.isfile(os.path.join(base, SAVED_MODEL_FILE))
                and version_numbers([os.path.basename(base)])):
            raise FileNotFoundError(f"--model_base_path {base} is a version directory (it holds "
                                    f"{SAVED_MODEL_FILE}): pass its parent, "
                                    f"{os.path.dirname(base)}")
        problem = (f"--model_base_path {base} holds no version: expected "
                   f"{os.path.join(base, '<version>', SAVED_MODEL_FILE)}, <version> a "
                   f"positive integer")
        if self._poll_wait == 0:
            raise FileNotFoundError(f"{problem} (--file_system_poll_wait_seconds=0 looks only "
                                    f"once)")
        logging.warning("%s; model '%s' is served once one appears (looking every %g s)",
                        problem, self.model_name, self._poll_wait)

    def _retire(self, servable):
        self._set_state(servable.version, _State.UNLOADING)
        servable.unload()
        self._set_state(servable.version, _State.END)
        logging.info("Unloaded version %d of model '%s'", servable.version, self.model_name)

    def _set_state(self, version, state, code=grpc.StatusCode.OK, message=""):
        with self._lock:
            self._states[version] = (state, code, message)


def _files_of(directory):
    """{relative path: (size, modification time)} of the files under `directory`: what tells
    a version that failed to load from the same version completed since."""
    files = {}
    for parent, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(parent, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            files[os.path.relpath(path, directory)] = (info.st_size, info.st_mtime_ns)
    return files
