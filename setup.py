"""Package discovery that cannot forget a subpackage: every folder of ``cvxdp/`` and ``models/`` (installed as
``cvxdp_models``), and the shipped ``cases/`` as ``cvxdp_models.cases``; every non-Python file in them is package
data. The rest of the metadata is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

EXCLUDE = ["*__pycache__*"]
packages = find_namespace_packages(include=["cvxdp", "cvxdp.*"], exclude=EXCLUDE)
packages += ["cvxdp_models"] + [f"cvxdp_models.{p}" for p in find_namespace_packages("models", exclude=EXCLUDE)]
packages += ["cvxdp_models.cases"]

setup(packages=packages,
      package_dir={"cvxdp_models": "models", "cvxdp_models.cases": "cases"},
      package_data={p: ["*"] for p in packages},
      exclude_package_data={p: ["*.pyc"] for p in packages})
