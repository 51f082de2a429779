"""setuptools' build with one step more: the data folders at the top of the checkout (recipes,
dataset manifests, reference runs, bench records) are copied into the wheel under
``pairrepro/shipped/``, where ``pairrepro.paths.shipped`` finds them. A checkout, and an
editable install of it, read them where they are; nothing is copied into the tree."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# paths.SHIPPED names the same folders: what pairrepro reads from them
SHIPPED = ("recipes/*.toml", "data_manifests/*.toml", "results/**/*", "bench/figures.toml",
           "bench/model_facts.json", "bench/preflight/*.json", "bench/records/*.json")


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib, "pairrepro", "shipped")
        shutil.rmtree(target, ignore_errors=True)  # a stale file of an earlier build goes
        for pattern in SHIPPED:
            for source in sorted(ROOT.glob(pattern)):
                if source.is_file():
                    copy = target / source.relative_to(ROOT)
                    self.mkpath(str(copy.parent))
                    self.copy_file(str(source), str(copy), preserve_mode=False)


setup(cmdclass={"build_py": BuildWithData})
