"""Ahead-of-time stages of a jitted function: Traced -> Lowered -> Compiled."""
from __future__ import annotations

from plax import tree_util
from plax.core.trace import get_aval
from plax.runtime import dispatch, xla


class Traced:
    """A jitted function traced for particular argument types."""

    def __init__(self, wrapped, entry, args_info):
        self._wrapped = wrapped
        self._entry = entry
        self.args_info = args_info

    @property
    def jaxpr(self):
        """The ClosedJaxpr of the function (closed-over constants included)."""
        return self._entry.user_jaxpr

    @property
    def out_info(self):
        return self._entry.out_info()

    def lower(self) -> "Lowered":
        return Lowered(self._wrapped, self._entry)


class Lowered:
    """A jitted function lowered to StableHLO for particular argument types."""

    def __init__(self, wrapped, entry):
        self._wrapped = wrapped
        self._entry = entry
        p = entry.params
        self._text, self._jaxpr, self._kept, self._donated = dispatch.lower_jitted(
            p["jaxpr"], p["name"], p["donated_invars"], p["keep_unused"],
            (p["device"] or dispatch.default_device()).platform)

    in_tree = property(lambda self: self._entry.in_tree)

    @property
    def out_info(self):
        """A pytree of ShapeDtypeStruct describing the outputs."""
        return self._entry.out_info()

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """The module ``compile`` hands to XLA, as StableHLO (the default) or ``"hlo"``.

        Source locations (MLIR ``loc(...)``, HLO metadata) are shown with ``debug_info=True``.
        """
        if dialect is None or dialect == "stablehlo":
            return self._text if debug_info else _strip_locations(self._text)
        if dialect == "hlo":
            return xla.stablehlo_to_hlo_text(self._text, debug_info)
        raise ValueError(f"unknown dialect: {dialect!r}; Lowered.as_text supports 'stablehlo' "
                         "and 'hlo'.")

    def compile(self, compiler_options=None) -> "Compiled":
        """Compile with XLA; ``compiler_options`` add to (and override) those given to jit."""
        p = self._entry.params
        options = dict(p["compiler_options"] or ())
        options.update(compiler_options or {})
        device = p["device"] or dispatch.default_device()
        exe = dispatch.compile_lowered(self._text, self._jaxpr, self._kept, self._donated, device,
                                       p["name"], options=dispatch.compiler_options_key(options))
        return Compiled(self._wrapped, self._entry, exe)


def _strip_locations(text: str) -> str:
    """``text`` without the `` loc(...)`` that end op lines (as MLIR prints without debug info)."""
    out, i = [], 0
    while True:
        j = text.find(" loc(", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        line_start = text.rfind("\n", 0, j) + 1
        if text.count('"', line_start, j) % 2:  # inside a string attribute: keep it
            out.append(text[i:j + 5])
            i = j + 5
            continue
        out.append(text[i:j])
        k, depth, in_str = j + 5, 1, False
        while depth and k < len(text):
            c = text[k]
            if in_str:
                if c == "\\":
                    k += 1
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            k += 1
        i = k


class Compiled:
    """A jitted function compiled by XLA; calling it checks the arguments match."""

    def __init__(self, wrapped, entry, exe):
        self._wrapped = wrapped
        self._entry = entry
        self._exe = exe

    in_tree = property(lambda self: self._entry.in_tree)

    @property
    def out_info(self):
        return self._entry.out_info()

    def as_text(self) -> str:
        """XLA's optimised HLO."""
        return xla.optimized_hlo_text(self._exe.program.exe)

    def cost_analysis(self) -> dict:
        """XLA's estimate: flops, transcendentals, bytes accessed, ..."""
        return dict(self._exe.program.exe.cost_analysis())

    def memory_analysis(self):
        """Argument, output, temporary and aliased sizes of the executable, in bytes."""
        return self._exe.program.exe.get_compiled_memory_stats()

    @property
    def input_shardings(self):
        s = dispatch.sharding_for(self._exe.program.device)
        return tree_util.tree_unflatten(self._entry.in_tree, [s] * self._entry.in_tree.num_leaves)

    @property
    def output_shardings(self):
        s = dispatch.sharding_for(self._exe.program.device)
        return tree_util.tree_unflatten(self._entry.out_tree, [s] * self._entry.out_tree.num_leaves)

    def __call__(self, *args, **kwargs):
        # As in JAX, a Compiled takes only the dynamic arguments: static ones are baked in.
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if in_tree != self._entry.in_tree:
            w = self._wrapped
            hint = (" Static arguments are compiled in: pass only the others."
                    if w._static_argnums or w._static_argnames else "")
            raise TypeError(f"Function compiled with input pytree does not match the input pytree "
                            f"it was called with: compiled for {self._entry.in_tree}, called "
                            f"with {in_tree}.{hint}")
        avals = [get_aval(x) for x in leaves]
        for i, (got, want) in enumerate(zip(avals, self._entry.in_avals)):
            if got.shape != want.shape or got.dtype != want.dtype:
                raise TypeError(
                    f"Argument types differ from the types for which this computation was "
                    f"compiled. Leaf {i} ({self._entry.arg_name(i)}) is {got.str_short()} but "
                    f"the computation was compiled for {want.str_short()}.")
        full = list(self._entry.consts) + list(leaves)
        _, committed = dispatch.pick_device(full, f"compiled function {self._entry.params['name']}")
        outs = self._exe.run(full, committed or self._entry.params["device"] is not None)
        return tree_util.tree_unflatten(self._entry.out_tree, outs)
