"""The modules `make compiled` builds with mypyc (the Makefile's CORE_COMPILED) must not set an attribute
to None without saying its type: mypyc then types the attribute as None, and the first assignment of
anything else fails at run time (`None object expected; got torch._C.Generator`: a seeded request's
sampling failed so, HTTP 500, until `Request.generator` was annotated). CI's first pass runs the pure-Python
modules, where the mistake is harmless, so it is checked here on the source too."""

import ast

from compiled_build import ROOT, compiled_modules, modules_not_built_as

from engine.core import core_build


def unannotated_none_attributes(source: str, filename: str) -> list[str]:
    """`self.x = None` in a method of a class that never gives `x` a type (in its body or as
    `self.x: T = ...`), as 'file:line: Class.x'."""
    found = []
    for cls in (node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef)):
        annotated = set()
        for node in ast.walk(cls):
            if isinstance(node, ast.AnnAssign):
                target = node.target
                if isinstance(target, ast.Name):
                    annotated.add(target.id)
                elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    if target.value.id == "self":
                        annotated.add(target.attr)
        for node in ast.walk(cls):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)):
                continue
            if node.value.value is not None:
                continue
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and target.attr not in annotated
                ):
                    found.append(f"{filename}:{node.lineno}: {cls.name}.{target.attr}")
    return found


def test_the_makefile_names_existing_modules():
    modules = compiled_modules()
    assert len(modules) >= 5, modules
    missing = [str(path) for path in modules if not path.exists()]
    assert not missing, f"CORE_COMPILED names modules that do not exist: {missing}"


def test_no_compiled_attribute_is_set_to_none_without_a_type():
    found = []
    for path in compiled_modules():
        found += unannotated_none_attributes(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, (
        "attributes set to None without a type in modules mypyc compiles (mypyc would type them "
        f"None); annotate them, e.g. `self.x: T | None = None`: {found}"
    )


def test_the_check_finds_the_mistake_and_accepts_its_fixes():
    mistake = "class R:\n    def __init__(self):\n        self.generator = None\n"
    assert unannotated_none_attributes(mistake, "r.py") == ["r.py:3: R.generator"]
    in_init = "class R:\n    def __init__(self):\n        self.generator: object = None\n"
    in_body = (
        "class R:\n    generator: object\n    def reset(self):\n        self.generator = None\n"
    )
    later = (
        "class R:\n    def __init__(self):\n        self.g: int | None = 1\n"
        "    def reset(self):\n        self.g = None\n"
    )
    assert unannotated_none_attributes(in_init, "r.py") == []
    assert unannotated_none_attributes(in_body, "r.py") == []
    assert unannotated_none_attributes(later, "r.py") == []


def test_every_compiled_module_comes_from_the_build_the_process_reports():
    """`core_build()` looks at the scheduler alone; the start-up check of `make test-compiled`
    (SURGEPLAN_EXPECT_BUILD) looks at every module, and must see all of them on this process's side and
    none on the other."""
    build = core_build()
    other = "pure Python" if build == "mypyc" else "mypyc"
    assert modules_not_built_as(build) == []
    assert len(modules_not_built_as(other)) == len(compiled_modules())
