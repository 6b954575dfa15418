"""Loaded at start-up of every trial run (benchmarks/stubs is first on PYTHONPATH).

Tutorial scripts animate their training with ``plt.pause`` in loops of thousands of steps. After
TRIAL_MAX_PAUSES pauses (default 3) the run ends as if the script had finished (exit status 0),
before and after the rewrite alike: by then every line of the loop, plotting included, has run.
"""

import importlib.abc
import importlib.util
import os
import sys

_LIMIT = int(os.environ.get("TRIAL_MAX_PAUSES", "3"))


class _PyplotPatcher(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name != "matplotlib.pyplot":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None:
            return None
        self._real = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        self._real.exec_module(module)
        real_pause = module.pause
        count = [0]

        def pause(interval):
            count[0] += 1
            if count[0] >= _LIMIT:
                raise SystemExit(0)
            return real_pause(min(interval, 0.01))

        module.pause = pause


if _LIMIT > 0:
    sys.meta_path.insert(0, _PyplotPatcher())
