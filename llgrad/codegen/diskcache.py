"""The on-disk cache of compiled objects.

Where: `LLGRAD_CACHE_DIR` if set (empty turns the cache off), else the platform's user
cache folder, by the rules platformdirs follows: `$XDG_CACHE_HOME/llgrad` (default
`~/.cache/llgrad`) on Linux and other POSIX systems, `~/Library/Caches/llgrad` on macOS,
`%LOCALAPPDATA%\\llgrad\\Cache` on Windows.

Layout: `<root>/<llgrad version>-llvm<LLVM version>/<2 hex>/<64 hex>` (objects) and
`.../ir/ir-<64 hex>` (generated LLVM IR texts). Each entry sits behind a magic string and
a SHA-256 of the toolchain's fingerprint (llgrad, llvmlite and LLVM versions, target triple,
CPU and features: `toolchain`), the entry's own key and its bytes, so a file copied or
renamed under another key's name, or built by another toolchain, does not check out; nor
does an IR text that does not decode.
Whatever does not check out is rebuilt, never loaded. Entries of other llgrad or LLVM
versions can never be hit (the key covers the versions) and `prune` removes them first.

Size: the cache holds at most `LLGRAD_CACHE_SIZE` bytes (default 1 GiB; `500M`, `2G`
and plain byte counts are accepted). A hit refreshes the entry's modification time, so
when a write takes the cache over its cap the least recently used entries go, down to
80% of the cap.

Trust: loading an object runs its code in this process, so an entry and its folders must
belong to this user and be writable by nobody else (`untrusted`); otherwise the cache is
not used and the user is warned once per folder.

`llgrad cache info|clear|prune` is the command line face of `info`, `clear` and `prune`.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .. import _log
from .._warnings import warn_at_user
from .._units import human_bytes
from .._version import __version__ as VERSION

__all__ = [
    "root",
    "folder",
    "get",
    "put",
    "info",
    "clear",
    "prune",
    "size_limit",
    "untrusted",
    "CacheInfo",
]

_MAGIC = b"LLGRADOBJ2"  # 2: the checksum covers the toolchain and the key
_ENTRY = re.compile(r"(ir-)?[0-9a-f]{64}(\.\d+\.\d+\.tmp)?")  # objects, IR texts
_FOLDER = re.compile(r"\d[\w.+-]*-llvm\d+(\.\d+)*")
DEFAULT_SIZE = 1 << 30
_refused: dict[str, str] = {}  # directory -> why its entries are not loaded
_lock = threading.Lock()
# bytes the cache holds: None until a scan (started by the first write, on a helper thread,
# since walking a large cache takes a while) has counted them; then kept up to date
_usage: list[int | None] = [None]
_scanning = [False]


def default_root() -> Path:
    """The platform's user cache folder for llgrad (platformdirs' rules)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(
            os.path.expanduser("~"), "AppData", "Local"
        )
        return Path(base) / "llgrad" / "Cache"
    if sys.platform == "darwin":
        return Path(os.path.expanduser("~")) / "Library" / "Caches" / "llgrad"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llgrad"


def root() -> Path | None:
    """`LLGRAD_CACHE_DIR`, else `default_root()`; None when `LLGRAD_CACHE_DIR=` is empty."""
    env = os.environ.get("LLGRAD_CACHE_DIR")
    if env is not None:
        return Path(env) if env else None
    return default_root()


def version_tag() -> str:
    import llvmlite.binding as llvm

    return f"{VERSION}-llvm{'.'.join(map(str, llvm.llvm_version_info))}"


def folder() -> Path | None:
    """This llgrad and LLVM version's folder inside the cache (None: cache off)."""
    r = root()
    return None if r is None else r / version_tag()


def size_limit() -> int:
    """`LLGRAD_CACHE_SIZE` in bytes (suffixes K, M, G), default 1 GiB."""
    text = os.environ.get("LLGRAD_CACHE_SIZE", "").strip()
    if not text:
        return DEFAULT_SIZE
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kKmMgG]?)i?[bB]?", text)
    if m is None:
        raise ValueError(f"LLGRAD_CACHE_SIZE must be a byte count such as 500M or 2G, got {text!r}")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


# -- trust ------------------------------------------------------------------------------


def untrusted(path: Path, directory: bool) -> str | None:
    """Why native code from `path` must not be loaded (None when it may be).

    Loading an object file runs its code in this process, so every entry and the folders
    that hold it must be this user's and writable by nobody else; a symlink is refused
    (it could point anywhere). Platforms without POSIX owners (Windows) rely on the
    folder's ACL and are not checked here.
    """
    if not hasattr(os, "getuid"):
        return None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot stat {path}: {e}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if directory != stat.S_ISDIR(st.st_mode):
        return f"{path} is not a {'directory' if directory else 'regular file'}"
    if st.st_uid != os.getuid():
        return f"{path} is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & 0o022:
        who = "others" if st.st_mode & 0o002 else "its group"
        return f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _folders_trusted(*folders: Path) -> bool:
    """Whether the cache's folders may be used; warns once per folder."""
    for f in folders:
        key = str(f)
        if key in _refused:
            return False
        why = untrusted(f, directory=True)
        if why is not None:
            _refuse(key, why)
            return False
    return True


def _refuse(key: str, why: str) -> None:
    _refused[key] = why
    message = (
        f"llgrad: not using the compiled-code cache at {key}: {why}. Compiled code "
        f"is built in this process instead; fix the permissions (chmod go-w, chown) "
        f"or set LLGRAD_CACHE_DIR to a private directory."
    )
    _log.log("cache", message)
    warn_at_user(message)


# -- entries ----------------------------------------------------------------------------


def get(key: str) -> bytes | None:
    r, d = root(), folder()
    if r is None or d is None:
        return None
    path = d / key[:2] / key
    if not _folders_trusted(r, d, path.parent):
        return None
    why = untrusted(path, directory=False)
    if why is not None:
        _refuse(str(path), why)
        return None
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 32
    if len(blob) < head or not blob.startswith(_MAGIC):
        _log.log("cache", f"corrupt entry {path.name}: bad header; rebuilding")
        return None
    digest, body = blob[len(_MAGIC) : head], blob[head:]
    if checksum(key, body) != digest:
        _log.log(
            "cache",
            f"corrupt entry {path.name}: checksum mismatch (another key's or "
            f"another toolchain's entry, or damaged); rebuilding",
        )
        return None
    why = _malformed(key, body)
    if why is not None:
        _log.log("cache", f"corrupt entry {path.name}: {why}; rebuilding")
        return None
    try:
        os.utime(path)  # recently used: pruned last
    except OSError:
        pass
    _log.log("cache", f"hit {path.name}")
    return body


_toolchain: list[str] = []


def toolchain() -> str:
    """What the compiled bytes depend on besides their key: llgrad's, llvmlite's and LLVM's
    versions, the target triple, the CPU and its features (the compiler's fingerprint)."""
    if not _toolchain:
        from .target import get_target  # circle: codegen.target -> here

        _toolchain.append(f"{version_tag()}|{get_target().fingerprint}")
    return _toolchain[0]


def checksum(key: str, body: bytes) -> bytes:
    """The SHA-256 an entry carries: of the toolchain, the key and the bytes."""
    h = hashlib.sha256(toolchain().encode())
    h.update(b"\0" + key.encode() + b"\0")
    h.update(body)
    return h.digest()


def _malformed(key: str, body: bytes) -> str | None:
    """Why a checked entry still cannot be what its key names (None: it can): an IR text
    must decode (objects are trusted on their checksum, which only this toolchain writing
    this key gives, and on the folder's ownership checks)."""
    if key.startswith("ir-"):
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return "an IR text that is not UTF-8"
    return None


def put(key: str, obj: bytes) -> None:
    """Write an entry atomically (a private temporary file renamed over the entry), so a
    reader in another process sees either no entry or a whole one; prune if the cache
    grew over its cap."""
    r, d = root(), folder()
    if r is None or d is None:
        return
    path = d / key[:2] / key
    try:
        for f in (r, d, path.parent):
            f.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _folders_trusted(r, d, path.parent):
            return
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + checksum(key, obj) + obj)
        os.replace(tmp, path)  # atomic: readers never see half an entry
    except OSError as e:
        _log.log("cache", f"could not write {path}: {e}")
        return
    limit = size_limit()
    with _lock:
        total = _usage[0]
        if total is not None:
            total = _usage[0] = total + len(obj) + len(_MAGIC) + 32
        elif not _scanning[0]:
            _scanning[0] = True
            threading.Thread(
                target=_count, args=(r, limit), daemon=True, name="llgrad-cache-scan"
            ).start()
    if total is not None and total > limit:
        prune(int(0.8 * limit))


def _count(r: Path, limit: int) -> None:
    """Count the cache's bytes (off the compile's path); prune if over the cap."""
    total = sum(e.size for e in _entries(r))
    with _lock:
        _usage[0], _scanning[0] = total, False
    if total > limit:
        prune(int(0.8 * limit))


@dataclass
class _Entry:
    path: Path
    size: int
    mtime: float
    tag: str


def _entries(r: Path) -> list[_Entry]:
    """Every file of the cache layout under `r` (nothing else there is touched)."""
    out: list[_Entry] = []
    try:
        tags = [t for t in r.iterdir() if t.is_dir() and _FOLDER.fullmatch(t.name)]
    except OSError:
        return out
    for t in tags:
        for sub in t.iterdir():
            if not (sub.is_dir() and re.fullmatch(r"[0-9a-f]{2}|ir", sub.name)):
                continue
            for p in sub.iterdir():
                if _ENTRY.fullmatch(p.name):
                    try:
                        st = p.lstat()
                    except OSError:
                        continue
                    out.append(_Entry(p, st.st_size, st.st_mtime, t.name))
    return out


@dataclass
class CacheInfo:
    """What `llgrad cache info` prints."""

    root: Path | None
    current: str
    limit: int
    folders: dict[str, tuple[int, int]] = field(default_factory=dict)  # tag: (n, bytes)
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def entries(self) -> int:
        return sum(n for n, _ in self.folders.values())

    @property
    def bytes(self) -> int:
        return sum(b for _, b in self.folders.values())

    def __str__(self) -> str:
        if self.root is None:
            return "compiled-code cache: off (LLGRAD_CACHE_DIR is empty)"
        lines = [
            f"compiled-code cache: {self.root}",
            f"  {self.entries} entries, {human_bytes(self.bytes)} of {human_bytes(self.limit)} "
            f"(LLGRAD_CACHE_SIZE)",
        ]
        for tag, (n, b) in sorted(self.folders.items()):
            mark = "  (this version)" if tag == self.current else "  (other version)"
            lines.append(f"  {tag}: {n} entries, {human_bytes(b)}{mark}")
        for where, why in self.refused.items():
            lines.append(f"  refused: {where}: {why}")
        return "\n".join(lines)


def info() -> CacheInfo:
    r = root()
    out = CacheInfo(r, version_tag(), size_limit(), refused=dict(_refused))
    if r is not None:
        why = untrusted(r, directory=True)
        if why is not None:
            out.refused[str(r)] = why
        for e in _entries(r):
            n, b = out.folders.get(e.tag, (0, 0))
            out.folders[e.tag] = (n + 1, b + e.size)
    return out


def _remove(entries: list[_Entry]) -> tuple[int, int]:
    n = nbytes = 0
    for e in entries:
        try:
            e.path.unlink()
        except OSError:
            continue
        n, nbytes = n + 1, nbytes + e.size
    return n, nbytes


def _remove_empty_folders(r: Path) -> None:
    for t in [t for t in r.iterdir() if t.is_dir() and _FOLDER.fullmatch(t.name)]:
        for sub in list(t.iterdir()):
            try:
                sub.rmdir()  # only when empty
            except OSError:
                pass
        try:
            t.rmdir()
        except OSError:
            pass


def clear() -> tuple[int, int]:
    """Remove every entry (all versions); (entries removed, bytes freed)."""
    r = root()
    if r is None or not r.is_dir():
        return 0, 0
    with _lock:
        done = _remove(_entries(r))
        _remove_empty_folders(r)
        _usage[0] = None
    _log.log("cache", f"cleared {done[0]} entries ({done[1]} bytes) from {r}")
    return done


def prune(limit: int | None = None) -> tuple[int, int]:
    """Remove other versions' entries, then the least recently used ones until the cache
    holds at most `limit` bytes (default: the cap); (entries removed, bytes freed)."""
    r = root()
    if r is None or not r.is_dir():
        return 0, 0
    limit = size_limit() if limit is None else limit
    current = version_tag()
    with _lock:
        entries = _entries(r)
        stale = [e for e in entries if e.tag != current]
        mine = sorted((e for e in entries if e.tag == current), key=lambda e: e.mtime)
        total = sum(e.size for e in mine)
        drop = []
        while mine and total > limit:
            e = mine.pop(0)
            drop.append(e)
            total -= e.size
        done = _remove(stale + drop)
        _remove_empty_folders(r)
        _usage[0] = total
    _log.log("cache", f"pruned {done[0]} entries ({done[1]} bytes) from {r}")
    return done
