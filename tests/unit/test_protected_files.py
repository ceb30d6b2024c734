"""The built-in file rules: credential files are never read or edited, files that make tools run code
are never edited, an operator can allow one explicitly, and `config check` shows the effective lists.

Each assertion checks the rule's own words (never text the path already holds)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autod.config.settings import load_config
from autod.errors import PlanRejected
from autod.safety.boundary import Boundary

CREDENTIAL = "a credential file is never read or edited"
RUNS_CODE = "a file that makes tools run code later is never edited"

# The families the red team found in prompts, and the common ones around them.
CREDENTIALS = [
    "credentials.json",
    "config/gcp-credentials.json",
    ".git-credentials",
    ".aws/credentials",
    "home/.aws/config",
    "deploy/id_ecdsa",
    "keys/id_ed25519_sk.pub",
    "ops/deploy_rsa",
    ".npmrc",
    "web/.npmrc",
    ".envrc",
    ".pgpass",
    ".docker/config.json",
    ".kube/config",
    "clusters/prod.kubeconfig",
    "kubeconfig",
    "gcp/my-service-account.json",
    "gcp/application_default_credentials.json",
    ".config/gcloud/legacy_credentials/x/adc.json",
    ".azure/accessTokens.json",
    "infra/terraform.tfstate",
    "infra/terraform.tfstate.backup",
    "infra/prod.tfvars",
    ".terraformrc",
    ".netrc",
    ".pypirc",
    ".gem/credentials",
    ".cargo/credentials.toml",
    ".my.cnf",
    "pip.conf",
    ".yarnrc.yml",
    "certs/server.p12",
    ".ssh/known_hosts",
    ".bash_history",
    "prod.env",
]
RUNS_CODE_FILES = [
    ".venv/lib/python3.11/site-packages/evil.pth",
    "venv/lib/python3.11/site-packages/x/__init__.py",
    "src/hook.pth",
    "sitecustomize.py",
    "src/usercustomize.py",
    "Makefile",
    "GNUmakefile",
    "tools/rules.mk",
    ".pre-commit-config.yaml",
    ".vscode/settings.json",
    ".vscode/tasks.json",
    ".idea/workspace.xml",
    ".github/workflows/ci.yml",
    ".gitlab-ci.yml",
    ".circleci/config.yml",
    ".gitattributes",
    ".gitmodules",
    "setup.py",
    "package.json",
    "frontend/package.json",
    ".cargo/config.toml",
    "Dockerfile",
    "docker-compose.yml",
    ".pdbrc",
    "src/__pycache__/calc.cpython-311.pyc",
    ".husky/pre-commit",
    "node_modules/x/index.js",
    ".devcontainer/devcontainer.json",
    "build.rs",
    "CMakeLists.txt",
]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "calc.py").write_text("x = 1\n")
    return root


def boundary(ws: Path, **kw: list[str]) -> Boundary:
    return Boundary(ws, ws / ".autod", kw.pop("deny", []), **kw)


@pytest.mark.parametrize("rel", CREDENTIALS)
def test_credential_files_are_never_read_nor_edited(ws: Path, rel: str) -> None:
    b = boundary(ws)
    f = ws / rel
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("token = abc\n")
    assert b.readable(rel) is None
    assert b.read_text(f) is None
    with pytest.raises(PlanRejected) as why:
        b.resolve(rel)
    assert CREDENTIAL in str(why.value)


@pytest.mark.parametrize("rel", RUNS_CODE_FILES)
def test_files_that_make_tools_run_code_are_never_edited(ws: Path, rel: str) -> None:
    with pytest.raises(PlanRejected) as why:
        boundary(ws).resolve(rel)
    assert RUNS_CODE in str(why.value) or CREDENTIAL in str(why.value)


def test_a_makefile_may_still_be_read_into_a_prompt(ws: Path) -> None:
    (ws / "Makefile").write_text("all:\n\ttrue\n")
    assert boundary(ws).readable("Makefile") == "Makefile"


def test_ordinary_source_is_neither_denied_nor_protected(ws: Path) -> None:
    b = boundary(ws)
    ordinary = ("src/calc.py", "src/credentials_check.py", "docs/build.md", "build/notes.txt", "src/venvs.py")
    for rel in ordinary:
        assert b.resolve(rel)[0] == rel


def test_an_operator_allows_one_file_explicitly_but_never_git_or_autods_own(ws: Path) -> None:
    b = boundary(ws, allow_globs=["Makefile", ".env.example", ".git/config", ".autod/**"])
    assert b.resolve("Makefile")[0] == "Makefile"
    assert b.resolve(".env.example")[0] == ".env.example"
    with pytest.raises(PlanRejected, match=r"\.git is never edited"):
        b.resolve(".git/config")
    with pytest.raises(PlanRejected, match="state dir"):
        b.resolve(".autod/state.db")
    with pytest.raises(PlanRejected) as why:
        b.resolve("GNUmakefile")  # the allow list exempts what it names, nothing more
    assert RUNS_CODE in str(why.value)


def test_the_operators_own_globs_add_to_the_built_in_ones(ws: Path) -> None:
    b = boundary(ws, deny=["data/private/**"], no_write_globs=["migrations/**"])
    assert b.readable("data/private/x.csv") is None
    with pytest.raises(PlanRejected, match=r"limits\.no_write_globs"):
        b.resolve("migrations/0001.py")
    with pytest.raises(PlanRejected) as why:
        b.resolve(".aws/credentials")  # the built-in list still holds
    assert CREDENTIAL in str(why.value)


def test_the_prompts_git_diff_loses_the_sections_of_credential_files(ws: Path) -> None:
    diff = "".join(
        f"diff --git a/{rel} b/{rel}\n--- a/{rel}\n+++ b/{rel}\n@@ -1 +1 @@\n-old\n+CANARY-{i}\n"
        for i, rel in enumerate([*CREDENTIALS[:12], "src/calc.py"])
    )
    kept = boundary(ws).filter_diff(diff)
    assert "CANARY-12" in kept  # the source file's section stays
    assert [n for n in range(12) if f"CANARY-{n}\n" in kept] == []


def test_config_check_prints_the_effective_deny_no_write_allow_and_judge_lists(ws: Path) -> None:
    from autod.act.judges import rule_lines

    doc = {
        "workspace": str(ws),
        "checks": {"tests": {"run": "python -m pytest -q"}},
        "limits": {"deny_globs": ["data/private/**"], "allow_globs": ["Makefile"]},
    }
    cfg = ws.parent / "autod.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    lines = rule_lines(load_config(cfg))
    by = {line.split(" (")[0].split(":")[0]: line for line in lines}
    assert ".aws" in by["deny"] and "limits.deny_globs: data/private/**" in by["deny"]
    assert "*.pth" in by["no-write"] and ".github" in by["no-write"]
    assert by["allow"].endswith(": Makefile")
    judges = next(line for line in lines if line.startswith("judges (auto-debug"))
    assert "pytest.toml" in judges and ".pytest.ini" in judges and "reach into the test runner" in judges


def test_the_security_page_shows_the_built_in_lists_as_the_code_has_them() -> None:
    from autod.safety.protected import markdown

    page = (Path(__file__).resolve().parents[2] / "docs" / "SECURITY.md").read_text()
    block = page.split("<!-- lists:begin -->\n", 1)[1].split("<!-- lists:end -->", 1)[0]
    assert block == markdown()
