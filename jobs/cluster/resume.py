"""Rerun to continue: where a `run` keeps its checkpoints, and what the next `run` of the same
job continues from.

A job is its spec file and its `name`: its folder is `.streamagents/<spec file stem>/<name>/`
beside the spec. There `run` keeps its checkpoints (unless the spec names
`checkpointing.dir`), retained when the job is cancelled or its process dies, the
savepoints of the stop command it prints, and
`attempts.json`, the record of its runs: each one's Flink job id, where its checkpoints
go, what it was restored from, a digest of the spec, and how it ended (`finished`,
`stopped` with a savepoint, `canceled`, `failed`, or nothing when the process died).

The next `run` continues unless the last one finished (its bounded input all answered):
from the savepoint it was stopped with, else from its latest completed checkpoint, else
from what it was itself restored from (it died before its first checkpoint). `--fresh`
forgets the record and the recorded checkpoints. Only the checkpoint folders of recorded
runs are ever deleted, and at most two runs' folders are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pyarrow import fs
from pydantic import BaseModel, ConfigDict

from streamagents.jobs.spec import LoadedSpec

__all__ = [
    "FOLDER_NAME",
    "Attempt",
    "Ending",
    "JobFolder",
    "Start",
    "latest_checkpoint",
    "plan_start",
    "spec_digest",
]

FOLDER_NAME = ".streamagents"
"""The folder beside a spec that holds the folders of its jobs."""
_CHECKPOINT = re.compile(r"^chk-(\d+)$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

Ending = Literal["finished", "stopped", "canceled", "failed"]
"""How a run ended, as its record says (no ending recorded: its process died)."""
_HOW = {
    None: "its process ended without stopping it",
    "stopped": "it was stopped with a savepoint",
    "canceled": "it was cancelled",
    "failed": "it failed",
}


class Attempt(BaseModel):
    """One `run` of the job, as `attempts.json` records it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    job_id: str
    checkpoints: str
    """The checkpoint directory (path or URI); Flink writes `<it>/<job_id>/chk-N`."""
    restored_from: str | None = None
    spec_sha256: str = ""
    ended: Ending | None = None
    savepoint: str | None = None
    """The savepoint it was stopped with (`ended == "stopped"`), when `run` saw it."""


@dataclass(frozen=True)
class Start:
    """How the next run starts: what it restores, and the sentence that says so."""

    restore_from: str | None
    message: str | None
    refusal: str | None = None
    """Set when `run` must not guess where to continue from (it says what to do instead)."""


def spec_digest(loaded: LoadedSpec) -> str:
    """A digest of the spec's text, to tell the user when the spec changed since a run."""
    return hashlib.sha256(loaded.path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class JobFolder:
    """The folder `run` keeps a job's checkpoints and its record of runs in."""

    root: Path

    @classmethod
    def of(cls, loaded: LoadedSpec) -> JobFolder:
        """The folder of the job a spec describes (its file and its name)."""
        return cls(loaded.base_dir / FOLDER_NAME / loaded.path.stem / loaded.spec.name)

    @property
    def default_checkpoints(self) -> Path:
        """Where checkpoints go when the spec names no `checkpointing.dir`."""
        return self.root / "checkpoints"

    @property
    def savepoints(self) -> Path:
        """Where the stop command `run` prints puts its savepoint."""
        return self.root / "savepoints"

    def newest_savepoint(self, job_id: str) -> str | None:
        """The newest complete savepoint of a job in `savepoints`, or None."""
        return newest_savepoint(str(self.savepoints), job_id)

    def attempts(self) -> list[Attempt]:
        """The recorded runs, oldest first (none when there is no readable record)."""
        try:
            entries = json.loads((self.root / "attempts.json").read_text(encoding="utf-8"))
            return [Attempt.model_validate(entry) for entry in entries]
        except (OSError, ValueError):
            return []

    def _write(self, attempts: list[Attempt]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        record = self.root / "attempts.json"
        temporary = record.with_name(".attempts.json.tmp")
        temporary.write_text(
            json.dumps([a.model_dump() for a in attempts], indent=1), encoding="utf-8"
        )
        temporary.replace(record)

    def begin(self, attempt: Attempt) -> None:
        """Record a run that has just started; forget the checkpoints of earlier runs except
        those of the run it continues (until it has checkpoints of its own)."""
        earlier = self.attempts()
        kept = [a for a in earlier if _holds(a, attempt.restored_from)][-1:]
        for old in earlier:
            if old not in kept:
                _delete_checkpoints(old)
        self._write([*kept, attempt])

    def end(self, job_id: str, ended: Ending, savepoint: str | None = None) -> None:
        """Record how a run ended; a finished run's checkpoints are no longer needed."""
        attempts = self.attempts()
        if ended == "finished":
            for attempt in attempts:
                _delete_checkpoints(attempt)
        self._write(
            [
                a.model_copy(update={"ended": ended, "savepoint": savepoint})
                if a.job_id == job_id
                else a
                for a in attempts
                if ended != "finished" or a.job_id == job_id
            ]
        )

    def forget(self) -> None:
        """Start over: delete the recorded runs' checkpoints and the record."""
        for attempt in self.attempts():
            _delete_checkpoints(attempt)
        self._write([])


def _filesystem(directory: str) -> tuple[fs.FileSystem, str]:
    """The pyarrow filesystem and path of a local directory or a URI."""
    if _URI.match(directory):
        return fs.FileSystem.from_uri(directory)
    return fs.LocalFileSystem(), str(Path(directory).resolve())


def _subdirectories(directory: str) -> tuple[fs.FileSystem, list[fs.FileInfo]]:
    """The filesystem of `directory` and the folders in it (none when it cannot be read)."""
    filesystem, path = _filesystem(directory)
    try:
        entries = filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
    except OSError:
        entries = []
    return filesystem, [entry for entry in entries if entry.type == fs.FileType.Directory]


def _as_given(directory: str, path: str) -> str:
    """`path`, as the filesystem of `directory` names it, with `directory`'s URI scheme if
    it was given one."""
    return f"{directory[: directory.index('://') + 3]}{path}" if _URI.match(directory) else path


def _holds(attempt: Attempt, location: str | None) -> bool:
    """Whether `location` (a checkpoint path or URI) lies in the attempt's checkpoints."""
    if location is None:
        return False
    _, own = _filesystem(f"{attempt.checkpoints.rstrip('/')}/{attempt.job_id}")
    _, other = _filesystem(location)
    return other == own or other.startswith(f"{own}/")


def _delete_checkpoints(attempt: Attempt) -> None:
    """Delete the checkpoints Flink wrote for one recorded run (and nothing else)."""
    filesystem, path = _filesystem(f"{attempt.checkpoints.rstrip('/')}/{attempt.job_id}")
    with contextlib.suppress(OSError):
        filesystem.delete_dir(path)


def newest_savepoint(directory: str, job_id: str, since: float = float("-inf")) -> str | None:
    """The newest complete savepoint of a job in `directory` (a local path or a URI; Flink
    names them `savepoint-<first 6 of the job id>-<random>`, complete once `_metadata` is
    written), made at `since` (epoch seconds; a second of slack for coarse file times) or
    later; its path (a URI keeps its scheme), or None."""
    filesystem, folders = _subdirectories(directory)
    prefix = f"savepoint-{job_id[:6]}-"
    complete = []
    for folder in folders:
        if not folder.base_name.startswith(prefix):
            continue
        metadata = filesystem.get_file_info(f"{folder.path}/_metadata")
        if metadata.type == fs.FileType.File and metadata.mtime is not None:
            made = metadata.mtime.timestamp()
            if made >= since - 1:
                complete.append((made, folder.path))
    return _as_given(directory, max(complete)[1]) if complete else None


def latest_checkpoint(checkpoints: str, job_id: str) -> str | None:
    """The job's completed checkpoint with the highest number (`<dir>/<job>/chk-N`, holding
    `_metadata`) under `checkpoints`, or None."""
    filesystem, folders = _subdirectories(f"{checkpoints.rstrip('/')}/{job_id}")
    numbered = sorted(
        (int(found.group(1)), folder.path)
        for folder in folders
        if (found := _CHECKPOINT.match(folder.base_name)) is not None
    )
    for _, candidate in reversed(numbered):
        if filesystem.get_file_info(f"{candidate}/_metadata").type == fs.FileType.File:
            return _as_given(checkpoints, candidate)
    return None


def plan_start(folder: JobFolder, digest: str) -> Start:
    """Where the next run of the job continues from, and the sentence that says so."""
    attempts = folder.attempts()
    if not attempts or attempts[-1].ended == "finished":
        return Start(None, None)
    last = attempts[-1]
    how = _HOW[last.ended]
    changed = (
        "\n  the spec changed since that run: its state is restored into the changed job"
        " (Flink refuses state no operator of the job claims; then run again with --fresh)"
        if last.spec_sha256 and last.spec_sha256 != digest
        else ""
    )
    if last.ended == "stopped":
        if last.savepoint is None:
            return Start(
                None,
                None,
                refusal=f"the previous run of this job (job {last.job_id}) was stopped with a "
                "savepoint: continue it with --from-savepoint PATH (the path `streamagents "
                "savepoint` printed), or start over with --fresh",
            )
        return Start(
            last.savepoint,
            f"continuing from the savepoint the previous run (job {last.job_id}) was stopped "
            f"with: {last.savepoint}   (--fresh starts over){changed}",
        )
    checkpoint = latest_checkpoint(last.checkpoints, last.job_id)
    if checkpoint is not None:
        number = checkpoint.rsplit("chk-", 1)[1]
        return Start(
            checkpoint,
            f"continuing from checkpoint {number} of the previous run (job {last.job_id}; "
            f"{how}): {checkpoint}   (--fresh starts over){changed}",
        )
    if last.restored_from is not None:
        return Start(
            last.restored_from,
            f"continuing from {last.restored_from}, where the previous run (job "
            f"{last.job_id}; {how}) started, as it took no checkpoint   (--fresh starts over)"
            f"{changed}",
        )
    return Start(
        None,
        f"the previous run (job {last.job_id}; {how}) took no checkpoint: starting from the "
        "beginning",
    )
