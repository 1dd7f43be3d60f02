"""The README's two set-up commands are the scripts that exist, and the scripts agree with the tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ._installed import SERVERS

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_has_exactly_the_two_set_up_commands_and_they_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
    assert [c.strip() for c in commands] == ["bash scripts/example.sh", "bash scripts/test.sh"]
    for command in commands:
        assert (ROOT / command.split()[1]).is_file()


def test_the_test_script_installs_the_package_of_every_server_the_tests_start() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    listed = re.search(r"^SERVERS=\(\n(.*?)^\)", script, flags=re.S | re.M)
    assert listed is not None
    packages = {line.split()[0].strip('"') for line in listed.group(1).splitlines() if line.strip()}
    assert packages == {package for package, _ in SERVERS.values()}


def test_the_scripts_make_a_virtualenv_with_the_given_python(tmp_path: Path) -> None:
    """What both commands do first; with a pyenv (or any non-Debian) Python nothing is installed."""
    venv = tmp_path / "venv"
    done = subprocess.run(["bash", "-c", '. scripts/_lib.sh && make_venv "$1" "$2"', "-",
                           str(venv), sys.executable], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert "venv: creating" in done.stdout
    assert (venv / "bin" / "python").exists()
    assert subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--version"],
                          capture_output=True, timeout=300).returncode == 0
