"""Fetch the source files from their official homes at pinned versions.

Each file is a :class:`Pin` in :data:`PINS`: source, version and checksums; its place under the
data directory is its entry of :data:`trek.datasets.common.LAYOUT`, which the loaders read too.
Two checksums are pinned, both of the reference copies the project was built against: ``sha256``
of the bytes, and ``content_sha256`` of the parsed content (:func:`content_fingerprint`), which
does not depend on serialisation. The latter matters for SealQA, whose reference copies were
re-saved to parquet, so their bytes need not equal those served by the Hub. Either may match.

:func:`pooch.retrieve` does the fetching (streaming into a temporary file removed on failure). It
checks bytes only: a pin without ``content_sha256`` is checked by pooch (``known_hash``); a pin with
one is fetched unchecked and tested here. Either way the file lands in a staging folder next to
its target and is renamed into place only once it matches, so a failed or tampered download leaves
no file, temporary file or empty folder behind. Offline, copy the files by hand to the paths that
``trek data download`` prints.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pooch
import requests

from trek.datasets.common import LAYOUT, SourceLayout
from trek.outputs import install_file

__all__ = [
    "UNPINNED",
    "SEALQA_REVISION",
    "Pin",
    "PINS",
    "DownloadOutcome",
    "content_fingerprint",
    "file_sha256",
    "fetch",
    "download_all",
    "manual_instructions",
    "select_pins",
]

#: Marker for a version a maintainer still has to fill in (it could not be looked up offline).
UNPINNED = "UNPINNED-maintainer-must-fill-in"

#: How pooch fetches: (connect, read) timeouts in seconds; redirects are followed.
DOWNLOADER = pooch.HTTPDownloader(
    timeout=(15, 60), headers={"User-Agent": "trek-data-download"}, chunk_size=1 << 16
)


@dataclass(frozen=True)
class Pin:
    """One pinned source file, written to ``source.relpath`` under the data directory.

    ``url`` may contain ``{revision}``, replaced by ``revision`` (a commit, a Hub revision or a
    sheet id).
    """

    name: str
    source: SourceLayout
    url: str
    revision: str
    sha256: str
    content_sha256: str | None
    home: str
    #: Said when a downloaded file does not match (e.g. why the source may have changed).
    note: str = ""

    @property
    def relpath(self) -> str:
        return self.source.relpath

    @property
    def dataset(self) -> str:
        return self.source.dataset

    @property
    def is_pinned(self) -> bool:
        return bool(self.revision) and self.revision != UNPINNED

    @property
    def resolved_url(self) -> str:
        return self.url.format(revision=self.revision)


# =============================================================================================
# PINNED VERSIONS — the single place to update when moving to a newer release of a dataset.
#
# The checksums are those of the reference copies the paper numbers were reproduced from
# (FreshQA 2025-04-07 export, InfoDeepSeek v1 with 245 questions, SealQA seal_hard (254) and
# seal_0 (111) test splits).
#
# * InfoDeepSeek: a commit of YunjiaXi/InfoDeepSeek that holds data/InfoDeepSeek_v1.json with the
#   same content as the reference copy (checked against a public code index, not by download).
# * FreshQA: the id of the Google Sheet the FreshQA README lists as "FreshQA April 7, 2025"; the
#   CSV export of that sheet is expected to equal the reference copy.
# * SealQA: revision 7cbbae5f8f6ce1178d540b32d56dd06c593716dd of the Hub dataset vtllms/sealqa,
#   the repository's head on 2026-05-19 according to a public record of a Hub metadata check
#   (files seal-0.parquet, seal-hard.parquet, longseal.parquet; seal-0.parquet 27,069 bytes, sha256
#   f9ffe13e542a2f05d05c448cd9575f9f5abfa5cd7442b16f5c6a021495ddfe8c). The authors rewrite these
#   files every few weeks (answers change), and our reference copies were re-saved to parquet
#   (their dataset card announces the update of April 5, 2026), so their bytes cannot match the
#   Hub's and only the content checksum can. Whether the content at this revision equals them
#   could not be checked here (no download from this machine): `trek data download` checks it,
#   and on a mismatch writes nothing and prints where to put a copy by hand. The reference copies'
#   checksums are verified by tests/test_datasets_integration.py wherever they are available.
# =============================================================================================
SEALQA_REVISION = "7cbbae5f8f6ce1178d540b32d56dd06c593716dd"
SEALQA_NOTE = (
    "SealQA's files on the Hub are rewritten every few weeks; the copy this project was checked "
    "against (seal_hard: 254 rows, 64 of them fast-changing) may sit at another revision."
)

PINS: tuple[Pin, ...] = (
    Pin(
        name="freshqa",
        source=LAYOUT["freshqa"],
        url="https://docs.google.com/spreadsheets/d/{revision}/export?format=csv",
        revision="1tSq24yACs1CrwzyUh1tg8U7Ej2CUcQYNjrGZgn4UtEI",
        sha256="b86e591ec0186d1b62344e6c5e4cac6a779ed0cc429b55d54ed2430c6703cebe",
        content_sha256="64a0076425549e7b88362d9bc77624d0191586f444e67bdf0d95418aeab98681",
        home="https://github.com/freshllms/freshqa (README: 'FreshQA April 7, 2025' sheet)",
    ),
    Pin(
        name="infodeepseek",
        source=LAYOUT["infodeepseek"],
        url="https://raw.githubusercontent.com/YunjiaXi/InfoDeepSeek/{revision}/data/InfoDeepSeek_v1.json",
        revision="b0ad137f413ecffef48a87b77fe3896a69e02f29",
        sha256="88f4911565c721da083074b93e7dd60056f04ab8315082cde2da81b9ed81cf44",
        content_sha256="2207970ceb09f9945e4a2063afc4bba19689b5dbcca9ab8f4b292ee7bc569688",
        home="https://github.com/YunjiaXi/InfoDeepSeek (data/InfoDeepSeek_v1.json; CC BY-NC 4.0)",
    ),
    Pin(
        name="sealqa_seal_hard",
        source=LAYOUT["sealqa"],
        url="https://huggingface.co/datasets/vtllms/sealqa/resolve/{revision}/seal-hard.parquet",
        revision=SEALQA_REVISION,
        sha256="90ff86b63b62bf3ee114ff3c84d7a8ce2ade8a3c176076ed500bdc9b0f6ebbc5",
        content_sha256="7af348594b3ce7366c0907d63a3c9b17d39a1645a80f160673b1ed38c1fabfd7",
        home="https://huggingface.co/datasets/vtllms/sealqa (config seal_hard, file seal-hard.parquet)",
        note=SEALQA_NOTE,
    ),
    Pin(
        name="sealqa_seal_0",
        source=LAYOUT["sealqa_seal_0"],
        url="https://huggingface.co/datasets/vtllms/sealqa/resolve/{revision}/seal-0.parquet",
        revision=SEALQA_REVISION,
        sha256="1de122f87081e0f36dd92a3ff54fb6d7b02a41398d86c9c8b7c08e7bab83f131",
        content_sha256="2109ea27635bec06fcc82c769db977b46f5dfad57ee5df054c8569af3be48ef5",
        home="https://huggingface.co/datasets/vtllms/sealqa (config seal_0, file seal-0.parquet)",
        note=SEALQA_NOTE,
    ),
)


# --------------------------------------------------------------------------------------------
# Checksums


def file_sha256(path: str | os.PathLike[str]) -> str:
    return pooch.file_hash(str(path), alg="sha256")


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def content_fingerprint(path: str | os.PathLike[str], kind: str | None = None) -> str | None:
    """sha256 of a file's parsed content, independent of its serialisation.

    * parquet: the rows as JSON objects (keys sorted; pandas index columns ``__*`` ignored);
    * JSON: the parsed value, re-serialised canonically;
    * CSV: the records, with line breaks inside cells normalised to ``\\n``.

    ``kind`` (``.parquet``, ``.json`` or ``.csv``) defaults to the file's extension. Returns
    ``None`` when the file cannot be parsed as that kind.
    """
    p = Path(path)
    suffix = (kind or p.suffix).lower()
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(p)
            keep = [c for c in table.column_names if not c.startswith("__")]
            payload = _canonical(table.select(keep).to_pylist())
        elif suffix == ".json":
            payload = _canonical(json.loads(p.read_text(encoding="utf-8-sig")))
        elif suffix == ".csv":
            text = p.read_text(encoding="utf-8-sig")
            records = [
                [c.replace("\r\n", "\n").replace("\r", "\n") for c in rec]
                for rec in csv.reader(io.StringIO(text, newline=""))
            ]
            payload = _canonical(records)
        else:
            return None
    except Exception:  # any parse failure simply means "no content match"
        return None
    return hashlib.sha256(payload).hexdigest()


def _verify(path: Path, pin: Pin) -> tuple[bool, str]:
    """Does ``path`` match the pin? Returns ``(ok, how)``."""
    digest = file_sha256(path)
    if digest == pin.sha256:
        return True, "sha256 of the bytes matches"
    if pin.content_sha256:
        fp = content_fingerprint(path, kind=Path(pin.relpath).suffix)
        if fp == pin.content_sha256:
            return True, "content checksum matches (bytes differ from the reference copy)"
        return (
            False,
            f"sha256 {digest} (expected {pin.sha256}); content checksum {fp} (expected {pin.content_sha256})",
        )
    return False, f"sha256 {digest} (expected {pin.sha256})"


# --------------------------------------------------------------------------------------------
# Download

Status = Literal["downloaded", "present", "failed", "checksum_mismatch", "unpinned", "conflict"]


@dataclass(frozen=True)
class DownloadOutcome:
    """What happened to one pinned file; ``ok`` is True for ``downloaded`` and ``present``."""

    pin: Pin
    path: Path
    status: Status
    message: str

    @property
    def ok(self) -> bool:
        return self.status in ("downloaded", "present")


def manual_instructions(data_dir: str | os.PathLike[str], pins: Iterable[Pin] | None = None) -> str:
    """How to set up the data directory by hand: each file, its source, and its exact place."""
    root = Path(data_dir)
    lines = [f"To work offline, put these files under the data directory {root}:"]
    for pin in PINS if pins is None else pins:
        lines += [
            f"  {pin.relpath}  ({pin.source.description})",
            f"      from: {pin.resolved_url if pin.is_pinned else pin.home}",
            f"      place it at: {root / pin.relpath}",
            f"      sha256: {pin.sha256}",
        ]
    lines.append(
        "Relative paths are under the data directory (--data-dir, else $TREK_DATA_DIR, else ./datasets)."
    )
    return "\n".join(lines)


def fetch(pin: Pin, data_dir: str | os.PathLike[str], *, force: bool = False) -> DownloadOutcome:
    """Download one pinned file into ``data_dir`` unless a matching copy is already there.

    An existing file that does not match is left untouched (status ``conflict``) unless
    ``force`` is set. Network and HTTP errors give status ``failed`` with instructions for
    placing the file by hand; a checksum mismatch gives ``checksum_mismatch``. Neither leaves a
    file (or a temporary file, or an empty folder) behind.
    """
    root = Path(data_dir)
    target = root / pin.relpath
    hint = (
        f"To continue offline, download it yourself and save it as {pin.relpath} under {root} "
        f"(i.e. {target}); source: {pin.home}."
    )
    if target.exists() and not force:
        ok, how = _verify(target, pin)
        if ok:
            return DownloadOutcome(pin, target, "present", f"already present ({how})")
        return DownloadOutcome(
            pin,
            target,
            "conflict",
            f"{target} exists but does not match the pinned version: {how}. "
            "Left untouched; remove it or pass --force to replace it.",
        )
    if not pin.is_pinned:
        msg = f"no pinned revision for {pin.name} yet (a maintainer must fill in PINS in trek/datasets/download.py)."
        return DownloadOutcome(pin, target, "unpinned", f"{msg} {hint}")

    url = pin.resolved_url
    new_dirs = [d for d in (target.parent, *target.parent.parents) if not d.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    log = pooch.get_logger()
    level = log.level
    log.setLevel(logging.WARNING)  # pooch's own "Downloading ..." lines would go to stderr
    try:
        with tempfile.TemporaryDirectory(prefix=f".{target.name}.", dir=target.parent) as staging:
            # pooch checks the bytes itself unless a content match must also be accepted
            known = None if pin.content_sha256 else f"sha256:{pin.sha256}"
            got = pooch.retrieve(url, known, fname=target.name, path=staging, downloader=DOWNLOADER)
            ok, how = _verify(Path(got), pin)
            if ok:
                install_file(got, target)
                return DownloadOutcome(pin, target, "downloaded", f"downloaded from {url} ({how})")
    except requests.HTTPError as e:
        return DownloadOutcome(pin, target, "failed", f"{url} answered HTTP {e.response.status_code}. {hint}")
    except requests.RequestException as e:
        return DownloadOutcome(pin, target, "failed", f"could not reach {url} ({type(e).__name__}). {hint}")
    except ValueError:  # pooch's known_hash check
        how = f"its sha256 differs from {pin.sha256}"
    finally:
        log.setLevel(level)
        for d in new_dirs:  # do not leave empty folders behind after a failure
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
    note = f" {pin.note}" if pin.note else ""
    return DownloadOutcome(
        pin,
        target,
        "checksum_mismatch",
        f"downloaded {url} but it does not match the pinned version: {how}. Nothing was written.{note} {hint}",
    )


def select_pins(names: Iterable[str] | None = None, pins: Iterable[Pin] | None = None) -> list[Pin]:
    """Pins whose ``name`` or ``dataset`` is in ``names`` (all when ``names`` is empty/None)."""
    all_pins = list(PINS if pins is None else pins)
    wanted = [n.strip().lower() for n in (names or []) if n.strip()]
    if not wanted:
        return all_pins
    unknown = [n for n in wanted if not any(n in (p.name, p.dataset) for p in all_pins)]
    if unknown:
        known = sorted({p.name for p in all_pins} | {p.dataset for p in all_pins})
        raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    return [p for p in all_pins if p.name in wanted or p.dataset in wanted]


def download_all(
    data_dir: str | os.PathLike[str], *, pins: Iterable[Pin] | None = None, force: bool = False
) -> list[DownloadOutcome]:
    """Fetch every pin in turn (one failure does not stop the others); all of PINS by default."""
    return [fetch(p, data_dir, force=force) for p in (PINS if pins is None else pins)]
