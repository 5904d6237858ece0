"""mkdocs hooks of the documentation site (``mkdocs.yml``).

* The front page is README.md: its links into ``docs/`` are made relative to the site.
* ``docs/formats.md`` gets each ``<!-- trek-schema: WHAT -->`` marker replaced by the output of
  ``trek schema WHAT``, so the formats page is the command's output at build time.
* In table rows, ``\\|`` inside a code span (GitHub's way to keep a pipe in a cell) becomes ``|``:
  Python-Markdown's tables already keep code spans whole and would show the backslash.
* Pages of :data:`OPTIONAL` join the navigation where they exist (written by other work in
  progress; the strict build refuses a page that is in no navigation section).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = re.compile(r"<!-- trek-schema: ([\w-]+) -->")
#: ``file: (navigation section, title)`` of pages listed only when the file is there.
OPTIONAL = {"exit-codes.md": ("Reference", "Exit codes"), "timings.md": ("Reference", "Timings")}


def schema(what: str) -> str:
    out = subprocess.run([sys.executable, "-m", "trek.cli", "schema", what], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"trek schema {what} failed: {out.stderr.strip()}")
    return f"```json\n{out.stdout.rstrip()}\n```"


def front_page() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.sub(r"\]\(docs/([^)]*)\)", lambda m: f"]({m.group(1) or 'index.md'})", text)


def on_config(config):
    listed = set(re.findall(r"[\w-]+\.md", repr(config["nav"])))
    for name, (section, title) in OPTIONAL.items():
        if name in listed or not (Path(config["docs_dir"]) / name).exists():
            continue
        for entry in config["nav"]:
            if isinstance(entry, dict) and section in entry:
                entry[section].append({title: name})
    return config


CODE_SPAN = re.compile(r"`[^`\n]*`")


def table_pipes(markdown: str) -> str:
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("|") and "\\|" in line:
            lines[i] = CODE_SPAN.sub(lambda m: m.group(0).replace("\\|", "|"), line)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs' hook signature)
    if page.file.src_uri == "index.md":
        markdown = front_page()
    elif page.file.src_uri == "formats.md":
        markdown = SCHEMA.sub(lambda m: schema(m.group(1)), markdown)
    return table_pipes(markdown)
