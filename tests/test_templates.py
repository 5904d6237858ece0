import functools
import re

import pytest
from _package import parse_file, walk_file

from trek import parts  # noqa: F401  (the list of parts completes the registry, as the command line does)
from trek.answer_prompts import (
    ANSWER_AS_OF_YEAR,
    ANSWER_AS_WRITTEN,
    answer_prompt,
    answer_prompt_version,
    year_fields,
)
from trek.templates import (
    UnknownTemplateError,
    known_templates,
    render,
    template,
    template_version,
)
from trek.types import Question


@pytest.fixture(autouse=True)
def _reset(monkeypatch):
    monkeypatch.delenv("TREK_PROMPTS", raising=False)
    yield


def q(**kw):
    base = dict(id="t:1", dataset="freshqa", question="Who leads the Harbor league?", answers=["X"])
    return Question(**{**base, **kw})


# -- answer prompts per dataset (paper B.5) ----------------------------------------------------------
def test_freshqa_and_sealqa_are_answered_as_of_their_year():
    for ds in ("freshqa", "sealqa"):
        text = answer_prompt(q(dataset=ds, effective_year=2024, effective_year_raw="2024"))
        assert "Who leads the Harbor league?" in text
        assert "held in 2024" in text and "the end of 2024" in text
        assert "latest" in text  # relative time words are explained


def test_infodeepseek_is_asked_as_written_even_with_a_year():
    plain = answer_prompt(q(dataset="infodeepseek"))
    assert plain == ANSWER_AS_WRITTEN.format(question="Who leads the Harbor league?")
    # the dataset decides, not the presence of a year
    with_year = answer_prompt(q(dataset="infodeepseek", effective_year=2024))
    assert with_year == plain and "2024" not in with_year


def test_freshqa_without_a_year_is_an_error_not_a_silent_other_prompt():
    with pytest.raises(ValueError, match=r"t:1.*no reference year"):
        answer_prompt(q(dataset="freshqa"))


def test_unknown_dataset_is_an_error():
    with pytest.raises(ValueError, match=r"no answer prompt for dataset 'trivia'.*freshqa"):
        answer_prompt(q(dataset="trivia"))


def test_a_bounded_year_is_phrased_as_a_bound():
    text = answer_prompt(q(dataset="sealqa", effective_year_raw="before 2024"))
    assert "held before 2024" in text
    assert "the time just before 2024" in text and "the end of 2023" in text
    for wrong in ("in before", "of before", "end of before", "at before"):
        assert wrong not in text
    assert year_fields(q(effective_year_raw="until 2022"))["moment"] == "the end of 2022"
    assert year_fields(q(effective_year_raw="Since 2021"))["period"] == "since 2021"
    with pytest.raises(ValueError, match="unreadable reference year"):
        year_fields(q(effective_year_raw="around 2020"))


def test_each_dataset_has_its_own_template_name(tmp_path, use_prompts):
    (tmp_path / "answer.sealqa.txt").write_text("SEAL {year}: {question}")
    use_prompts(tmp_path)
    assert answer_prompt(q(dataset="sealqa", effective_year_raw="before 2024")).startswith(
        "SEAL before 2024: "
    )
    # FreshQA keeps the built-in text and version
    assert answer_prompt(q(effective_year=2024)).startswith("Reply with the final answer only")
    assert answer_prompt_version(q(effective_year=2024)) == "answer-2"
    assert answer_prompt_version(q(dataset="sealqa", effective_year=2024)).startswith("answer-2+override.")


def test_override_from_folder_changes_text_and_version(tmp_path, monkeypatch):
    v0 = answer_prompt_version(q(effective_year=2024))
    (tmp_path / "answer.freshqa.txt").write_text("In {year}: {question} -> ")
    monkeypatch.setenv("TREK_PROMPTS", str(tmp_path))
    assert answer_prompt(q(effective_year=2024)) == "In 2024: Who leads the Harbor league? -> "
    v1 = answer_prompt_version(q(effective_year=2024))
    assert v1 != v0 and v1.startswith(v0 + "+override.")


def test_override_with_unknown_field_is_rejected(tmp_path, use_prompts):
    (tmp_path / "answer.freshqa.txt").write_text("{question} {colour}")
    use_prompts(tmp_path)
    with pytest.raises(ValueError, match=r"answer.freshqa.txt.*colour"):
        template("answer.freshqa", ANSWER_AS_OF_YEAR)


def test_missing_folder_is_an_error(tmp_path, use_prompts):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        use_prompts(tmp_path / "nowhere")
    assert template_version("answer.infodeepseek", ANSWER_AS_WRITTEN, "v1") == "v1"


# -- unknown names are errors -------------------------------------------------------------------------
def test_known_templates_cover_every_module():
    names = set(known_templates())
    for name in (
        "answer.freshqa",
        "answer.infodeepseek",
        "answer.sealqa",
        "agent.system",
        "agent.hints",
        "grader.freshqa",
        "grader.infodeepseek",
        "grader.infodeepseek_false_premise",
        "grader.sealqa",
        "search.proxy",
    ):
        assert name in names, name


def test_misspelled_override_file_is_an_error_listing_known_names(tmp_path, use_prompts):
    (tmp_path / "grader.sealqaa.txt").write_text("{question}")
    with pytest.raises(UnknownTemplateError, match=r"grader\.sealqaa.*known templates:.*grader\.sealqa"):
        use_prompts(tmp_path)


def test_misspelled_override_file_found_through_the_environment(tmp_path, monkeypatch):
    (tmp_path / "answer.freshqa.txt").write_text("{question}")
    (tmp_path / "answer.fresh_qa.txt").write_text("{question}")
    monkeypatch.setenv("TREK_PROMPTS", str(tmp_path))
    with pytest.raises(UnknownTemplateError, match="answer.fresh_qa"):
        answer_prompt(q(effective_year=2024))


def test_render_of_an_unknown_name_is_an_error():
    with pytest.raises(UnknownTemplateError, match=r"'no-such-name'.*answer\.freshqa"):
        render("no-such-name")
    # a registered name renders without repeating its text
    assert render("answer.infodeepseek", question="Q?").endswith("Question: Q?\nAnswer:")


def test_a_name_is_registered_once_and_passed_with_its_own_text():
    from trek import templates

    with pytest.raises(ValueError, match="registered twice"):
        templates.register("answer.freshqa", "another text {question}")
    assert templates.register("answer.infodeepseek", ANSWER_AS_WRITTEN) is ANSWER_AS_WRITTEN  # same text: fine
    with pytest.raises(ValueError, match="must look like 'group.name'"):
        templates.register("nogroup", "x")
    # a caller cannot slip in a text or a name of its own
    with pytest.raises(ValueError, match="'answer.freshqa': the built-in text passed differs"):
        render("answer.freshqa", "Q: {question}", question="?")
    with pytest.raises(UnknownTemplateError, match="'rag.not_registered'"):
        template_version("rag.not_registered", "text", "v1")


@pytest.mark.slow  # a fresh interpreter importing every declaring module: about 2.5 s
def test_every_template_is_known_from_the_index_alone(tmp_path):
    """In a fresh interpreter that imported nothing else, the index declares every template, and
    a prompts folder may override templates of every group (trace, ctrl and rag included)."""
    import json
    import subprocess
    import sys

    folder = tmp_path / "prompts"
    folder.mkdir()
    for name in ("trace.verdict", "ctrl.render.url", "rag.answer", "grader.sealqa", "search.openai"):
        (folder / f"{name}.txt").write_text("{question}")
    code = (
        "import json, sys\n"
        "import trek.cli\n"
        "from trek import templates\n"
        "with templates.prompts_folder(sys.argv[1]):\n"
        "    print(json.dumps(sorted(templates.known_templates())))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == _declared_in_sources()[0] == set(known_templates())


def test_the_list_of_parts_imports_every_declaring_module():
    import importlib.util
    from pathlib import Path

    import trek

    root = Path(trek.__file__).parent
    spec = importlib.util.spec_from_file_location("af", root.parent / "scripts" / "architecture_figures.py")
    fig = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fig)
    graph = fig.import_graph(root, packages=True)[0]
    reached, todo = set(), ["trek.parts"]
    while todo:  # what importing trek.parts and running import_all() imports, directly or not
        m = todo.pop()
        if m not in reached:
            reached.add(m)
            todo += graph.get(m, ())
    declaring = _declared_in_sources()[3]
    assert declaring <= reached, f"import them from trek/parts.py: {sorted(declaring - reached)}"


def test_no_module_below_the_command_line_imports_a_module_by_name():
    import ast
    from pathlib import Path

    import trek

    root = Path(trek.__file__).parent
    bad = [f"{p.relative_to(root.parent)}:{n.lineno}" for p in sorted(root.rglob("*.py")) if "cli" not in p.parts
           for n in walk_file(p)
           if (isinstance(n, ast.Attribute) and n.attr == "import_module")
           or (isinstance(n, ast.Name) and n.id in ("__import__", "import_module"))
           or (isinstance(n, ast.alias) and n.name == "import_module")]
    assert bad == [], "register where defined and list the part in trek/parts.py: " + ", ".join(bad)


def test_registered_names_are_the_names_the_code_uses():
    registered, used, problems, _ = _declared_in_sources()
    assert not problems
    assert used == registered
    assert len(registered) >= 35  # every prompt of answers, search, graders, trace, ctrl and rag


# -- an AST walk over trek/: what is registered, and which names are used with which text -----------
_TEMPLATE_CALLS = {"render", "template", "template_version"}
_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")


@functools.cache
def _declared_in_sources() -> tuple[set[str], set[str], list[str], set[str]]:
    """``(registered, used, problems, declaring modules)`` read from Trek's sources.

    *registered*: names given to ``register(...)``. *used*: names passed to ``render``,
    ``template`` or ``template_version`` as a literal, names held by ``*TEMPLATE*`` constants, and
    names that travel next to the built-in text registered under them
    (``("agent.system", AGENTIC_SYSTEM_PROMPT)``, ``run(..., queries.TEMPLATE, queries.PROMPT, ...)``,
    ``{"ctrl.x": X_PROMPT}``): every call path hands a template's name and its text on together.
    *problems*: a name next to the text of another template, or next to a ``*PROMPT`` that is
    not registered.
    """
    import ast
    from pathlib import Path

    import trek

    root = Path(trek.__file__).parent
    trees = {
        "trek." + ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): parse_file(p)
        for p in sorted(root.rglob("*.py"))
    }
    trees = {k.removesuffix("."): v for k, v in trees.items()}

    def aliases(tree):  # local name -> (module, attribute or None)
        out = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    out[a.asname or a.name] = (node.module, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    out[a.asname or a.name] = (a.name, None)
        return out

    consts = {m: {} for m in trees}  # module -> {NAME: string literal}
    for m, tree in trees.items():
        for node in tree.body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        consts[m][t.id] = node.value.value
    imports = {m: aliases(tree) for m, tree in trees.items()}

    def string(m, node):
        """The string a name expression stands for (a literal or a module constant), else None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in consts[m]:
                return consts[m][node.id]
            src = imports[m].get(node.id)
            if src and src[1] is not None:
                return consts.get(src[0], {}).get(src[1])
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            src = imports[m].get(node.value.id)
            if src:
                mod = src[0] if src[1] is None else f"{src[0]}.{src[1]}"
                return consts.get(mod, {}).get(node.attr)
        return None

    def callee(node):
        """The trek.templates function a call calls (under any alias), else None."""
        f, m = node.func, current[0]
        if isinstance(f, ast.Name):
            src = imports[m].get(f.id)
            if m == "trek.templates" and f.id in {"register", *_TEMPLATE_CALLS}:
                return f.id
            return src[1] if src and src[0] == "trek.templates" else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            src = imports[m].get(f.value.id)
            if src and (src[0] if src[1] is None else f"{src[0]}.{src[1]}") == "trek.templates":
                return f.attr
        return None

    current = [""]  # the module being walked, for callee()
    registered: set[str] = set()
    declaring: set[str] = set()
    texts: dict[tuple[str, str], set[str]] = {}  # (module, TEXT constant) -> names it is registered under
    for m, tree in trees.items():
        current[0] = m
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and callee(node) == "register" and node.args:
                name = string(m, node.args[0])
                assert name is not None, f"{m}: register() with a name that is not a constant"
                registered.add(name)
                declaring.add(m)
                if len(node.args) > 1 and isinstance(node.args[1], ast.Name):
                    texts.setdefault((m, node.args[1].id), set()).add(name)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and callee(node.value) == "register":
                name = string(m, node.value.args[0])
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        texts.setdefault((m, t.id), set()).add(name)

    def text_names(m, node):
        """Names whose registered text ``node`` is (a text constant, or a register() call)."""
        if isinstance(node, ast.Call) and callee(node) == "register":
            return {string(m, node.args[0])}
        if isinstance(node, ast.Name):
            if (m, node.id) in texts:
                return texts[(m, node.id)]
            src = imports[m].get(node.id)
            if src and src[1] is not None:
                return texts.get((src[0], src[1]), set())
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            src = imports[m].get(node.value.id)
            if src:
                mod = src[0] if src[1] is None else f"{src[0]}.{src[1]}"
                return texts.get((mod, node.attr), set())
        return set()

    used: set[str] = set()
    problems: list[str] = []
    for m, tree in trees.items():
        current[0] = m
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and callee(node) in _TEMPLATE_CALLS and node.args:
                name = string(m, node.args[0])
                if name is not None:
                    used.add(name)
            if isinstance(node, ast.Call) and callee(node) == "register":
                continue
            pairs = []
            if isinstance(node, ast.Call):
                pairs = list(zip(node.args, node.args[1:], strict=False))
            elif isinstance(node, ast.Tuple | ast.List):
                pairs = list(zip(node.elts, node.elts[1:], strict=False))
            elif isinstance(node, ast.Dict):
                pairs = [(k, v) for k, v in zip(node.keys, node.values, strict=True) if k is not None]
            for first, second in pairs:
                name, owners = string(m, first), text_names(m, second)
                if name is None or not _NAME.match(name):
                    continue
                if name in owners:
                    used.add(name)
                elif owners:
                    problems.append(f"{m}:{first.lineno}: name {name!r} next to the text of {sorted(owners)}")
                elif (second.id if isinstance(second, ast.Name) else getattr(second, "attr", "")).endswith("PROMPT"):
                    problems.append(f"{m}:{first.lineno}: {name!r} used with a prompt that is not registered")
        # a module constant that holds a template's name (``TEMPLATE = "trace.verdict"``) is a use
        used |= {v for k, v in consts[m].items() if "TEMPLATE" in k and _NAME.match(v)}
    return registered, used, problems, declaring


def test_prompt_folder_is_scoped_to_its_block_and_reaches_worker_threads(tmp_path):
    from trek import templates
    from trek.aio import run_sync

    (tmp_path / "answer.freshqa.txt").write_text("SCOPED {year}: {question}")
    with templates.prompts_folder(tmp_path):
        assert answer_prompt(q(effective_year=2024)).startswith("SCOPED 2024")

        async def inside_a_loop():
            return run_sync(_render_async())  # a nested run_sync goes through a worker thread

        async def _render_async():
            return answer_prompt(q(effective_year=2024))

        assert run_sync(inside_a_loop()).startswith("SCOPED 2024")
    assert answer_prompt(q(effective_year=2024)).startswith("Reply with the final answer only")
