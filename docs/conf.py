"""Sphinx configuration for the bailing_flask documentation.

Build (warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # the package and example_app, without installing them
sys.path.insert(0, os.path.join(HERE, "_ext"))

import bailing_flask  # noqa: E402

project = "bailing_flask"
author = "bailing_flask contributors"
copyright = "bailing_flask contributors"
release = bailing_flask.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "bailing_docs",
    "bailing_layers",
    "bailing_run",
]

# No network during the build: no intersphinx, no remote images.
root_doc = "index"
# the Reliability page's parts (load, fuzzing, faults, the generated figures) are
# included into reliability.rst, not documents of their own
exclude_patterns = ["_build", "reliability/*"]
templates_path: list[str] = []
html_static_path = ["_static"]
default_role = "code"
pygments_style = "default"
nitpicky = False

# -- autodoc ---------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_default_options = {
    "show-inheritance": True,
}
autodoc_mock_imports: list[str] = []
python_use_unqualified_type_names = True

# -- HTML ------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"bailing_flask {release}"
html_theme_options = {
    # code blocks and wide tables scroll inside the page instead of running off it
    "navigation_with_keys": True,
}
html_css_files: list[str] = ["bailing.css"]
