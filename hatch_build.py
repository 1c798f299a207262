"""Builds the widget's JavaScript bundle when the wheel is built.

`pip install .` runs this hook: it installs the npm packages pinned in js/package-lock.json
and bundles js/src into jaxviz/static/ with esbuild, so no manual step and no CDN is needed.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

ROOT = pathlib.Path(__file__).parent
JS = ROOT / "js"
STATIC = ROOT / "jaxviz" / "static"


def build_js() -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is needed to build jaxviz's widget bundle (apt-get install npm)")
    if not (JS / "node_modules").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS, check=True)
    subprocess.run([npm, "run", "build"], cwd=JS, check=True)


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        if (JS / "package.json").exists():
            build_js()
