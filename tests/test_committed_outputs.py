"""The committed figures/ and tables/ (written by `make paper` from the recorded runs)."""

import re

import pytest

from trek.report.paths import repo_root

TABLES = sorted((repo_root() / "tables").glob("*.tex"))


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.name)
def test_committed_tables_print_no_tuples_and_no_raw_delta(path):
    tex = path.read_text(encoding="utf-8")
    assert "Δ" not in tex, f"{path.name}: a raw Δ (LaTeX needs $\\Delta$)"
    assert not re.search(r"\('[^']*', ", tex), f"{path.name}: a MultiIndex row printed as a Python tuple"


def test_committed_table1_and_figure6_carry_intervals_and_real_distractor_counts():
    tables = repo_root() / "tables"
    assert "95\\% intervals" in (tables / "tab1_wild_accuracy.tex").read_text()
    budget = (tables / "fig6_budget.csv").read_text().splitlines()
    assert budget[0].split(",")[-3:] == ["distractors", "distractors_min", "distractors_max"]
    assert "ci_low" in budget[0] and "ci_high" in (tables / "fig6_position.csv").read_text().splitlines()[0]


# --- the committed outputs are what this install writes -----------------------------------------

def _pins() -> dict[str, str]:
    """``{package: version}`` from constraints.txt (the versions `make install` installs)."""
    pins = {}
    for line in (repo_root() / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not NAME==VERSION"
            pins[name.strip().lower()] = version.strip()
    return pins


def _off_pins() -> str:
    """The installed packages whose versions differ from constraints.txt, for a failure message."""
    from importlib.metadata import PackageNotFoundError, version

    off = []
    for name, pinned in _pins().items():
        try:
            have = version(name)
        except PackageNotFoundError:
            have = "not installed"
        if have != pinned:
            off.append(f"{name} {have} (constraints.txt: {pinned})")
    return ("; installed versions off constraints.txt: " + ", ".join(off) +
            " (pip install -c constraints.txt -e .)") if off else "; every pin of constraints.txt is installed"


def _compare(written: dict[str, bytes], committed_dir) -> list[str]:
    """The names in ``written`` whose bytes differ from ``committed_dir/<name>`` (or that it lacks)."""
    bad = []
    for name, data in sorted(written.items()):
        ref = committed_dir / name
        if not ref.is_file():
            bad.append(f"{name} (not committed)")
        elif ref.read_bytes() != data:
            bad.append(f"{name} ({len(data)} bytes written, {ref.stat().st_size} committed)")
    return bad


def run_cells(notebook, figures_dir, tables_dir) -> None:
    """Execute ``notebook``'s code cells in this process, as Papermill does in a kernel, with the
    parameters cell's defaults and ``figures_dir``/``tables_dir`` set after it (``display`` is a
    no-op; matplotlib's settings are restored afterwards)."""
    import json

    import matplotlib

    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    ns = {"display": lambda *a, **k: None, "__name__": "__main__"}
    with matplotlib.rc_context():
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            exec(compile("".join(cell["source"]), f"{notebook.name}", "exec"), ns)  # noqa: S102
            if "parameters" in cell.get("metadata", {}).get("tags", []):
                ns.update(figures_dir=str(figures_dir), tables_dir=str(tables_dir))
        import matplotlib.pyplot as plt

        plt.close("all")


def test_the_constraints_pin_what_shapes_the_outputs():
    pins = _pins()
    assert {"fonttools", "matplotlib", "pillow", "numpy", "pandas"} <= set(pins)
    make = (repo_root() / "Makefile").read_text(encoding="utf-8")
    assert make.count("-c constraints.txt") >= 2  # Trek's install and the test tools' install both keep the pins


@pytest.mark.slow
def test_the_committed_fig4_is_what_this_install_writes(tmp_path):
    """Figure 4 (PDF, PNG, CSV, TeX) from the notebook's own cells on the recorded build equals the
    committed files byte for byte: the fontTools subsetter, FreeType and Pillow of this install
    write what was committed (``make paper`` refreshes them after a pin changes)."""
    root = repo_root()
    run_cells(root / "notebooks" / "fig4_shortcuts.ipynb", tmp_path / "f", tmp_path / "t")
    written_f = {p.name: p.read_bytes() for p in (tmp_path / "f").iterdir()}
    written_t = {p.name: p.read_bytes() for p in (tmp_path / "t").iterdir()}
    assert set(written_f) == {"fig4_shortcuts.pdf", "fig4_shortcuts.png"}
    bad = _compare(written_f, root / "figures") + _compare(written_t, root / "tables")
    assert not bad, "differ from what this install writes: " + ", ".join(bad) + _off_pins()


@pytest.mark.slow
def test_every_committed_output_is_what_make_paper_writes(tmp_path):
    """`make paper` into a scratch folder writes exactly the committed figures/ and tables/: the same
    names, the same bytes."""
    import subprocess

    root = repo_root()
    res = subprocess.run(["make", "paper", f"OUT={tmp_path}", "-o", ".venv/.trek-installed", "JOBS=2"],
                         cwd=root, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    bad = []
    for sub in ("figures", "tables"):
        written = {p.name: p.read_bytes() for p in (tmp_path / sub).iterdir()}
        committed = {p.name for p in (root / sub).iterdir() if p.is_file()}
        bad += [f"{sub}/{n}" for n in _compare(written, root / sub)]
        bad += [f"{sub}/{n} (committed, not written)" for n in sorted(committed - set(written))]
    assert not bad, "committed outputs that differ from what this install writes: " + ", ".join(bad) + _off_pins()
