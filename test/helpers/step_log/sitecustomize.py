"""Counts a trainer's optimizer steps from outside it (the adoption test and
bench/run_adopt.sh put this directory first on PYTHONPATH): every
torch.optim.Optimizer.step appends "rank pid time" to $STEP_LOG, so batches
redone and the time every rank trained again after a kill can be measured on
a script that is not changed for it. Inert without STEP_LOG."""

import os

_path = os.environ.get("STEP_LOG")
if _path:
    import builtins
    import types

    _real_import = builtins.__import__

    def _hook_optimizer(optim_module):
        optimizer = optim_module.Optimizer
        if getattr(optimizer, "_step_logged", False):
            return
        fd = os.open(_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        original_init = optimizer.__init__

        def init(self, *args, **kwargs):
            original_init(self, *args, **kwargs)
            # torch wraps each subclass's step at construction: wrap this instance's
            step = self.step

            def logged(_self, *a, **k):
                result = step(*a, **k)
                line = "%s %d %.6f\n" % (os.environ.get("RANK", "-"), os.getpid(), __import__("time").time())
                os.write(fd, line.encode())
                return result

            # a bound method, as an LR scheduler expects of optimizer.step (it re-wraps it through __self__)
            self.step = types.MethodType(logged, self)

        optimizer.__init__ = init
        optimizer._step_logged = True

    def _import(name, globals=None, locals=None, fromlist=(), level=0):
        module = _real_import(name, globals, locals, fromlist, level)
        if name.startswith("torch"):
            import sys

            optim = sys.modules.get("torch.optim.optimizer")
            if optim is not None and hasattr(optim, "Optimizer"):
                _hook_optimizer(optim)
                builtins.__import__ = _real_import
        return module

    builtins.__import__ = _import
