"""The template registry (cvxdp.templates): declarations from installed packages' entry points, builders, settings
hooks and the [model] keys a template declares."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import cvxdp.templates as T
from cvxdp.errors import ConfigError, InvalidParameterError


@pytest.fixture
def registry(monkeypatch):
    """The registry's state, restored afterwards (the installed packages' entry points read again on first use)."""
    monkeypatch.setattr(T, "_REGISTERED", dict(T._REGISTERED))
    monkeypatch.setattr(T, "_DECLARED", {})
    monkeypatch.setattr(T, "_ENTRY_POINTS", None)


def install_fake_package(root: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """A distribution as pip leaves it (a dist-info directory with its entry points, its modules beside it) in
    ``root``, which the caller puts on sys.path."""
    info = root / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = ["[cvxdp.templates]", *(f"{name} = {value}" for name, value in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for module, source in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(source))


DECLARATION = """
    from cvxdp import ModelKey, Template

    def build(model, *, base_dir):
        return {"built": model.get("size", 2), "base_dir": base_dir}

    def settings(model):
        return {"size": model.get("size", 2)}

    TEMPLATE = Template("{name}", build, settings=settings, reads_data=False,
                        keys=(ModelKey("size", "int >= 1", "2", "how many"),))
"""


@pytest.fixture
def site(tmp_path, monkeypatch, registry):
    """A directory on sys.path for fake installed packages (their modules forgotten afterwards)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("fake_"):
            del sys.modules[name]


def test_a_package_declares_a_template_by_entry_point(site):
    install_fake_package(site, "fake_templates", {"fake_one": "fake_one_decl:TEMPLATE"},
                         {"fake_one_decl": DECLARATION.replace("{name}", "fake_one")})
    assert "fake_one" in T.template_names() and "power" in T.template_names()  # beside the bundled ones
    assert "fake_one_decl" not in sys.modules  # listing the names imports no declaration
    assert T.build_model("fake_one", {"size": 4}, base_dir=site) == {"built": 4, "base_dir": site}
    assert T.template_settings("fake_one", {}) == {"size": 2}
    assert not T.template_reads_data("fake_one")
    assert [k.name for k in T.model_keys("fake_one")] == ["size"]


def test_undeclared_model_keys_are_refused_before_the_build(site):
    install_fake_package(site, "fake_templates", {"fake_two": "fake_two_decl:TEMPLATE"},
                         {"fake_two_decl": DECLARATION.replace("{name}", "fake_two")})
    with pytest.raises(ConfigError, match=r"Unknown key\(s\) 'sise' in \[model\] of the fake_two template. "
                                          r"Allowed: size\."):
        T.build_model("fake_two", {"sise": 4}, base_dir=site)
    with pytest.raises(ConfigError, match="Unknown key"):
        T.template_settings("fake_two", {"sise": 4})


def test_a_broken_entry_point_is_named_with_its_package(site):
    install_fake_package(site, "fake_broken", {"fake_three": "fake_three_decl:TEMPLATE"},
                         {"fake_three_decl": "import fake_no_such_module\n"})
    with pytest.raises(ConfigError, match=r"The template 'fake_three' could not be loaded from the entry point "
                                          r"fake_three = 'fake_three_decl:TEMPLATE' of package 'fake_broken': "
                                          r"ModuleNotFoundError"):
        T.build_model("fake_three", {}, base_dir=site)


def test_an_entry_point_must_name_a_template_declaration(site):
    install_fake_package(site, "fake_wrong", {"fake_four": "fake_four_decl:build", "fake_five": "fake_five_decl:T"},
                         {"fake_four_decl": "def build(model, *, base_dir):\n    return model\n",
                          "fake_five_decl": DECLARATION.replace("{name}", "another_name").replace("TEMPLATE", "T")})
    with pytest.raises(ConfigError, match=r"The entry point fake_four = 'fake_four_decl:build' of package "
                                          r"'fake_wrong' must name a cvxdp.Template declaration with name "
                                          r"'fake_four'. Got <function build"):
        T.build_model("fake_four", {}, base_dir=site)
    with pytest.raises(ConfigError, match=r"must name a cvxdp.Template declaration with name 'fake_five'"):
        T.template_reads_data("fake_five")


def test_run_help_names_a_broken_template_package_instead_of_failing(site):
    from cvxdp.config.schema import schema_epilog

    install_fake_package(site, "fake_broken", {"fake_seven": "fake_seven_decl:TEMPLATE"},
                         {"fake_seven_decl": "raise RuntimeError('no licence')\n"})
    epilog = schema_epilog()
    assert "the templates' [model] keys are missing: The template 'fake_seven' could not be loaded" in epilog
    assert "RuntimeError: no licence" in epilog and "[run]: seed=" in epilog


def test_two_packages_declaring_one_template_name_are_refused(site):
    install_fake_package(site, "fake_first", {"fake_six": "fake_six_a:TEMPLATE"}, {})
    install_fake_package(site, "fake_second", {"fake_six": "fake_six_b:TEMPLATE"}, {})
    with pytest.raises(ConfigError, match=r"Two installed packages declare the template 'fake_six': the entry "
                                          r"point fake_six = 'fake_six_\w:TEMPLATE' of package 'fake_\w+' and the "
                                          r"entry point .* Uninstall one of them\."):
        T.template_names()


def test_the_bundled_templates_are_entry_points():
    from importlib.metadata import entry_points

    from cvxdp_models import declarations

    found = {ep.name: ep.load() for ep in entry_points(group=T.ENTRY_POINT_GROUP) if ep.dist.name == "cvxdp"}
    assert found == {d.name: d for d in (declarations.POWER, declarations.LOGISTIC, declarations.ERM,
                                         declarations.VERTICAL, declarations.TOY)}


def test_a_registered_template_takes_precedence(registry):
    T.register_template("toy", lambda model, base_dir: "mine")
    assert T.build_model("toy", {"anything": 1}, base_dir=".") == "mine"  # declared no keys: none checked
    assert T.template_reads_data("toy")


def test_settings_hook_is_registered_beside_the_builder(registry):
    T.register_template("t", lambda model, base_dir: model, settings=lambda model: {"k": model.get("k", 1)})
    assert T.template_settings("t", {}) == {"k": 1}
    T.register_template("t", lambda model, base_dir: model)  # registered again without a hook: none
    assert T.template_settings("t", {}) is None
    assert T.template_settings("no such template", {}) is None  # build_model names the problem instead
    with pytest.raises(ConfigError, match="The 'template' entry of \\[case\\] must be one of .*'power'.*'t'"):
        T.build_model("no such template", {}, base_dir=".")


def test_settings_target_is_validated(registry):
    with pytest.raises(InvalidParameterError, match="'settings' parameter of register_template must be a callable"):
        T.register_template("t", lambda model, base_dir: model, settings=3)


def test_declarations_are_validated():
    with pytest.raises(InvalidParameterError, match="The 'build' parameter of Template must be a callable"):
        T.Template("t", "no_colon")
    with pytest.raises(InvalidParameterError, match="The 'keys' parameter of Template must be a sequence of "
                                                    "ModelKey with distinct names"):
        T.Template("t", "m:f", keys=(T.ModelKey("a", "int", "1", ""), T.ModelKey("a", "int", "2", "")))
    with pytest.raises(InvalidParameterError, match="The 'name' parameter of ModelKey must be a non-empty str"):
        T.ModelKey("", "int", "1", "")


def test_a_template_declares_whether_it_reads_a_data_file(registry):
    assert not T.template_reads_data("power") and not T.template_reads_data("toy")
    assert T.template_reads_data("logistic")
    T.register_template("t", lambda model, base_dir: model, reads_data=False)
    assert not T.template_reads_data("t")
    T.register_template("t", lambda model, base_dir: model)  # registered again with the default: reads data
    assert T.template_reads_data("t")
    with pytest.raises(InvalidParameterError, match="'reads_data' parameter of register_template must be a bool"):
        T.register_template("t", lambda model, base_dir: model, reads_data="no")
