"""The persistent compilation cache: XLA executables kept on disk between processes.

On by default. Each entry is one file ``<sha256 hex>.xlaexe`` in the cache directory
(``jax_compilation_cache_dir``, else ``$PLAX_CACHE_DIR``, else
``$XDG_CACHE_HOME/plax/xla`` or ``~/.cache/plax/xla``). The name hashes everything that
decides the machine code: the StableHLO text, the compile options, the devices, the
platform and its version, jaxlib's version, the host CPU and ``XLA_FLAGS``. A file holds a
fixed header (magic, format version, the key digest, the payload's length and sha256)
and then the serialised executable, so a truncated, corrupted or foreign file is
recognised before XLA sees a byte of it; such a file (or one XLA fails to load, or one that
cannot be read) is removed and the program compiled afresh and written anew, with one
warning per process naming the entry and what was wrong with it. Writes go to a temporary
file in the same directory, renamed into place, so concurrent processes see whole entries or
none. The directory is kept under
``jax_compilation_cache_max_size`` bytes by removing the least recently used entries (a hit
refreshes an entry's modification time).

This module never imports jaxlib: ``runtime.xla`` hands it the facts for the key and the
functions that serialise and deserialise.
"""
from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
import time
import warnings

from plax.core.config import config

FORMAT_VERSION = 1
_MAGIC = b"PLAXEXE\n"
_HEADER = struct.Struct("<8sI32s32sQ")  # magic, format, key digest, payload sha256, length
_SUFFIX = ".xlaexe"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_SECS = 3600.0  # a temporary file this old belongs to a writer that died
_LOW_WATER = 0.9  # eviction trims the directory to this fraction of the bound

_log = logging.getLogger("plax")
_lock = threading.Lock()
_estimates: dict = {}  # directory -> this process's estimate of its total size in bytes
_warned: set = set()  # directories whose I/O failure was already reported

# Counters for this process (tests and benchmarks read them).
stats = {"hits": 0, "misses": 0, "writes": 0, "uncacheable": 0, "rejected": 0}


def cache_dir() -> str:
    """The directory entries are read from and written to now."""
    path = config.read("compilation_cache_dir") or os.environ.get("PLAX_CACHE_DIR")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                 ".cache")
        path = os.path.join(base, "plax", "xla")
    return os.path.abspath(os.path.expanduser(path))


def enabled() -> bool:
    return bool(config.read("enable_compilation_cache")) and \
        config.read("compilation_cache_max_size") != 0


_host_facts = None


def _host() -> bytes:
    """What identifies the host CPU's instruction set (CPU executables are machine code)."""
    global _host_facts
    if _host_facts is None:
        import platform
        flags = ""
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith(("flags", "Features", "model name")):
                        flags += line.strip() + "\n"
                        if line.startswith(("flags", "Features")):
                            break
        except OSError:
            pass
        _host_facts = f"{platform.machine()}\n{flags}".encode()
    return _host_facts


def make_key(text: str, facts) -> bytes:
    """The sha256 digest naming the entry of ``text`` compiled under ``facts`` (strings and
    numbers: options, devices, platform, versions)."""
    h = hashlib.sha256()

    def part(data: bytes) -> None:
        h.update(struct.pack("<Q", len(data)))
        h.update(data)

    part(b"plax-xla-cache/%d" % FORMAT_VERSION)
    part(str(text).encode())
    part(repr(tuple(facts)).encode())
    part(_host())
    part(os.environ.get("XLA_FLAGS", "").encode())
    return h.digest()


def module_name(text: str) -> str:
    """The ``@name`` of a StableHLO module (for log lines)."""
    head = str(text)[:400]
    at = head.find("module @")
    if at < 0:
        return "<module>"
    rest = head[at + 8:]
    end = 0
    while end < len(rest) and (rest[end].isalnum() or rest[end] in "_.$-"):
        end += 1
    return rest[:end] or "<module>"


def _path(directory: str, key: bytes) -> str:
    return os.path.join(directory, key.hex() + _SUFFIX)


def _report_io_failure(directory: str, error: Exception) -> None:
    if directory not in _warned:
        _warned.add(directory)
        _log.warning("The persistent compilation cache in %s is not usable (%s); programs are "
                     "compiled without it.", directory, error)


def _logging() -> bool:
    return bool(config.read("log_compiles"))


def note_uncacheable(text: str, why: str) -> None:
    """``text`` is compiled without the cache (e.g. it has host callbacks)."""
    stats["uncacheable"] += 1
    if _logging():
        _log.warning("Persistent compilation cache not used for %s (%s): XLA compiles it",
                     module_name(text), why)


def _read_payload(path: str, key: bytes) -> bytes | None:
    """The payload of the entry at ``path``, or None when there is none. An entry that is
    not whole and this program's raises ``_BadEntry`` saying why."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        if not os.path.isdir(os.path.dirname(path)):
            raise  # the directory itself is unusable: reported as such by the caller
        raise _BadEntry(f"unreadable ({type(e).__name__}: {e.strerror or e})") from e
    if len(data) < _HEADER.size:
        raise _BadEntry(f"truncated: {len(data)} bytes, shorter than an entry's "
                        f"{_HEADER.size}-byte header")
    magic, version, digest, checksum, length = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if magic != _MAGIC:
        raise _BadEntry("not a plax cache entry (it does not start with plax's mark)")
    if version != FORMAT_VERSION:
        raise _BadEntry(f"written in entry format {version}; this plax reads format "
                        f"{FORMAT_VERSION}")
    if digest != key:
        raise _BadEntry("its header names another program's key (a file copied or renamed "
                        "over it)")
    if length != len(payload):
        raise _BadEntry(f"truncated: {len(payload)} of its {length} bytes"
                        if len(payload) < length else
                        f"{len(payload) - length} bytes longer than its header says")
    if hashlib.sha256(payload).digest() != checksum:
        raise _BadEntry("corrupt: its bytes do not match their sha256 checksum")
    return payload


class _BadEntry(Exception):
    """An entry of the cache that cannot be used (the message says why)."""


_fault_reported = False  # one warning per process; later faults go to the log


def _replace_bad_entry(path: str, text: str, why: str) -> None:
    """Remove a bad entry (the program is compiled afresh and written anew) and say so:
    a warning the first time in this process, a log line after that. With
    ``jax_raise_persistent_cache_errors`` the fault is raised instead."""
    global _fault_reported
    stats["rejected"] += 1
    try:
        os.rmdir(path) if os.path.isdir(path) else os.unlink(path)
    except OSError:
        pass
    message = (f"Error reading persistent compilation cache entry for '{module_name(text)}': "
               f"{path} is {why}. plax removed it and compiles the program afresh, writing "
               f"a new entry.")
    if config.read("raise_persistent_cache_errors"):
        raise RuntimeError(message + " (Raised because jax_raise_persistent_cache_errors is "
                                     "set; unset it to go on with a warning.)")
    if _fault_reported:
        _log.info("%s", message)
        return
    _fault_reported = True
    warnings.warn(message + " (Further faults of the cache in this process are logged to the "
                            "'plax' logger, not warned.)", stacklevel=2)


def fetch(key: bytes, text: str, deserialize):
    """The executable stored under ``key`` (``deserialize(payload)`` makes it), or None.

    An entry that is damaged or fails to load is replaced: removed, reported, and the
    caller compiles and stores afresh.
    """
    directory = cache_dir()
    path = _path(directory, key)
    exe = None
    try:
        payload = _read_payload(path, key)
        if payload is not None:
            try:
                exe = deserialize(payload)
            except Exception as e:  # noqa: BLE001 - e.g. an entry XLA no longer accepts
                raise _BadEntry(f"not loadable by XLA ({type(e).__name__}: "
                                f"{str(e).strip()[:300]})") from e
    except _BadEntry as bad:
        _replace_bad_entry(path, text, str(bad))
    except OSError as e:
        _report_io_failure(directory, e)
    if exe is None:
        stats["misses"] += 1
        return None
    stats["hits"] += 1
    try:
        os.utime(path)  # the entry is recently used
    except OSError:
        pass
    if _logging():
        _log.warning("Persistent compilation cache hit for %s", module_name(text))
    return exe


def store(key: bytes, text: str, serialize, compile_secs: float) -> bool:
    """Write the entry of a program XLA compiled in ``compile_secs``; ``serialize()`` gives
    its bytes. Returns whether an entry was written; never raises."""
    name = module_name(text)
    bound = config.read("compilation_cache_max_size")
    if compile_secs < float(config.read("persistent_cache_min_compile_time_secs")):
        return _written(False, name, compile_secs, "compiled faster than "
                        "jax_persistent_cache_min_compile_time_secs")
    try:
        payload = serialize()
    except Exception as e:  # noqa: BLE001 - not every executable serialises
        return _written(False, name, compile_secs, f"XLA could not serialise it: {e}")
    min_size = config.read("persistent_cache_min_entry_size_bytes")
    if min_size > 0 and len(payload) < min_size:
        return _written(False, name, compile_secs,
                        "smaller than jax_persistent_cache_min_entry_size_bytes")
    size = _HEADER.size + len(payload)
    if 0 < bound < size:
        return _written(False, name, compile_secs, "larger than jax_compilation_cache_max_size")
    directory = cache_dir()
    header = _HEADER.pack(_MAGIC, FORMAT_VERSION, key, hashlib.sha256(payload).digest(),
                          len(payload))
    import tempfile
    tmp = None
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            f.write(payload)
        os.replace(tmp, _path(directory, key))  # atomic: readers see all of it or nothing
    except OSError as e:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        _report_io_failure(directory, e)
        return False
    stats["writes"] += 1
    if bound > 0:
        _account(directory, size, bound, key)
    return _written(True, name, compile_secs, "")


def _written(wrote: bool, name: str, secs: float, why: str) -> bool:
    if _logging():
        if wrote:
            _log.warning("Persistent compilation cache miss for %s: XLA compiled it in %.3f s; "
                         "entry written", name, secs)
        else:
            _log.warning("Persistent compilation cache miss for %s: XLA compiled it in %.3f s; "
                         "not written (%s)", name, secs, why)
    return wrote


def _account(directory: str, size: int, bound: int, keep: bytes) -> None:
    """Add a new entry's size to the directory's estimate; scan and evict when it is over."""
    with _lock:
        estimate = _estimates.get(directory)
        if estimate is not None and estimate + size <= bound:
            _estimates[directory] = estimate + size
            return
        _estimates[directory] = evict(directory, bound, keep=_path(directory, keep))


def evict(directory: str, bound: int, keep: str | None = None) -> int:
    """Remove the least recently used entries of ``directory`` while its entries total more
    than ``bound`` bytes (down to a little under it); returns the total left."""
    entries, total, now = [], 0, time.time()
    try:
        scan = list(os.scandir(directory))
    except OSError:
        return 0
    for e in scan:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue  # removed meanwhile
        if e.name.endswith(_SUFFIX):
            entries.append((st.st_mtime, st.st_size, e.path))
            total += st.st_size
        elif e.name.startswith(_TMP_PREFIX) and now - st.st_mtime > _STALE_TMP_SECS:
            try:
                os.unlink(e.path)
            except OSError:
                pass
    if total <= bound:
        return total
    target = int(bound * _LOW_WATER)
    for _, size, path in sorted(entries):
        if total <= target:
            break
        if path == keep:
            continue
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= size
    return total


def reset() -> None:
    """Forget this process's view of the cache (size estimates, reported failures), as if
    nothing had been compiled yet; the directory and its entries stay as they are."""
    global _fault_reported
    with _lock:
        _estimates.clear()
        _warned.clear()
        _fault_reported = False


def clear(directory: str | None = None) -> None:
    """Remove every entry of the cache directory (the current one by default)."""
    directory = directory or cache_dir()
    try:
        scan = list(os.scandir(directory))
    except OSError:
        return
    for e in scan:
        if e.name.endswith(_SUFFIX):
            try:
                os.unlink(e.path)
            except OSError:
                pass
    with _lock:
        _estimates.pop(directory, None)
