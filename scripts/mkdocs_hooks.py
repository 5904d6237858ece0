"""mkdocs hooks of the documentation site (``mkdocs.yml``).

* The front page is README.md: its links into ``docs/`` are made relative to the site.
* ``docs/formats.md`` gets each ``<!-- trek-schema: WHAT -->`` marker replaced by the output of
  ``trek schema WHAT``, so the formats page is the command's output at build time.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = re.compile(r"<!-- trek-schema: ([\w-]+) -->")


def schema(what: str) -> str:
    out = subprocess.run([sys.executable, "-m", "trek.cli", "schema", what], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"trek schema {what} failed: {out.stderr.strip()}")
    return f"```json\n{out.stdout.rstrip()}\n```"


def front_page() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.sub(r"\]\(docs/([^)]*)\)", lambda m: f"]({m.group(1) or 'index.md'})", text)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs' hook signature)
    if page.file.src_uri == "index.md":
        return front_page()
    if page.file.src_uri == "formats.md":
        return SCHEMA.sub(lambda m: schema(m.group(1)), markdown)
    return markdown
