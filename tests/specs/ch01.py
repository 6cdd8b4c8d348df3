"""Chapter 01 checks: rnn_step, RNN(input_size, hidden_size) and gradient_norms(rnn, x).

Each case builds your RNN with the weights saved with the inputs (so nothing depends on your
initialisation). Public cases use the seeds below; the grader adds hidden cases with other seeds and
shapes. Expected outputs come from the reference (tests/reference/ch01.pt); for the linear recurrence
they also follow by hand (``linear_norms``), which tests/test_ch01_why_not_rnns.py checks.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib.provided.checking import _, Case, CheckFailure, Outputs, ready_made_case

CHAPTER = "01"
TITLE = "Why not RNNs"
MODULES = ["rnn.py"]  # the learner's files this chapter grades

PARAMETERS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


# ---------------------------------------------------------------- inputs (deterministic by seed)
def _weights(g: torch.Generator, input_size: int, hidden_size: int, dtype: torch.dtype) -> dict[str, Tensor]:
    """Weights of the scale torch.nn.RNN draws, so that tanh works in its curved part, not saturated."""
    return {
        "weight_ih": torch.randn(hidden_size, input_size, generator=g, dtype=dtype) / input_size ** 0.5,
        "weight_hh": torch.randn(hidden_size, hidden_size, generator=g, dtype=dtype) / hidden_size ** 0.5,
        "bias_ih": 0.3 * torch.randn(hidden_size, generator=g, dtype=dtype),
        "bias_hh": 0.3 * torch.randn(hidden_size, generator=g, dtype=dtype),
    }


def step(seed: int, batch: int = 2, input_size: int = 3, hidden_size: int = 5,
         dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """The arguments of one rnn_step: x_t (batch, input_size), h_prev (batch, hidden_size) and the weights."""
    g = torch.Generator().manual_seed(seed)
    inputs = {"x_t": torch.randn(batch, input_size, generator=g, dtype=dtype),           # (batch, input_size)
              "h_prev": torch.tanh(torch.randn(batch, hidden_size, generator=g, dtype=dtype))}  # (batch, hidden)
    return {**inputs, **_weights(g, input_size, hidden_size, dtype)}


def sequence(seed: int, batch: int = 2, seq: int = 6, input_size: int = 3, hidden_size: int = 5,
             h0: bool = False, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """x (batch, seq, input_size), the RNN's weights and, with ``h0``, an initial state (batch, hidden_size)."""
    g = torch.Generator().manual_seed(seed)
    inputs = {"x": torch.randn(batch, seq, input_size, generator=g, dtype=dtype)}        # (batch, seq, input)
    inputs.update(_weights(g, input_size, hidden_size, dtype))
    if h0:
        inputs["h0"] = torch.tanh(torch.randn(batch, hidden_size, generator=g, dtype=dtype))  # (batch, hidden)
    return inputs


def linear(seed: int, batch: int = 2, seq: int = 8, input_size: int = 3, hidden_size: int = 4,
           decay: float = 0.7) -> dict[str, Tensor]:
    """x (batch, seq, input_size) and a linear recurrence h_t = decay·h_{t-1} + x_t Mᵀ (see ``Linear``)."""
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(batch, seq, input_size, generator=g),                      # (batch, seq, input)
            "mix": torch.randn(hidden_size, input_size, generator=g),                    # M (hidden, input)
            "decay": torch.tensor(decay)}


def linear_norms(inputs: dict[str, Tensor]) -> Tensor:
    """The exact answer for ``Linear``: ∂h_T/∂x_t = decay^(T-t) M, so its norm is decay^(T-t)·‖M‖_F."""
    batch, seq, _ = inputs["x"].shape
    distance = torch.arange(seq - 1, -1, -1, dtype=torch.float32)                       # (seq,) T - t
    norms = inputs["decay"] ** distance * torch.linalg.matrix_norm(inputs["mix"])       # (seq,)
    return norms.expand(batch, seq)                                                      # (batch, seq)


class Linear(nn.Module):
    """A recurrence whose gradients are known by hand: h_t = decay·h_{t-1} + x_t Mᵀ, h_0 = 0.

    Like RNN, forward(x) returns (outputs (batch, seq, hidden), h_last (batch, hidden)). Unrolled,
    h_T = Σ_t decay^(T-t) x_t Mᵀ, so ∂h_T/∂x_t = decay^(T-t) M (see ``linear_norms``).
    """

    def __init__(self, mix: Tensor, decay: Tensor) -> None:
        super().__init__()
        self.mix, self.decay = mix, decay

    def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        h = x.new_zeros(x.shape[0], self.mix.shape[0]) if h0 is None else h0            # (batch, hidden)
        history = []
        for x_t in x.unbind(dim=1):                                                      # x_t: (batch, input)
            h = self.decay * h + x_t @ self.mix.T                                        # (batch, hidden)
            history.append(h)
        return torch.stack(history, 1), h                                                # (batch, seq, hidden)


# ---------------------------------------------------------------- probes (they call your code)
def build(impl, inputs: dict[str, Tensor]) -> nn.Module:
    """Your RNN with the case's weights, in the inputs' dtype."""
    hidden_size, input_size = inputs["weight_ih"].shape
    module = impl.rnn.RNN(input_size, hidden_size)
    if not isinstance(module, nn.Module):
        raise CheckFailure("RNN must be an nn.Module (class RNN(nn.Module))")
    module = module.to(inputs["x"].dtype).eval()
    with torch.no_grad():
        for name in PARAMETERS:
            p = getattr(module, name, None)
            if not isinstance(p, nn.Parameter) or p.shape != inputs[name].shape:
                got = "missing" if p is None else f"{type(p).__name__} of shape {tuple(getattr(p, 'shape', ()))}"
                raise CheckFailure("RNN({input_size}, {hidden_size}) needs a parameter {name} of shape {shape} "
                                   "(nn.Parameter), got {got}: the checks load their weights into it",
                                   input_size=input_size, hidden_size=hidden_size, name=name,
                                   shape=tuple(inputs[name].shape), got=got)
            p.copy_(inputs[name])
    return module


def _run(module: nn.Module, inputs: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    result = module(inputs["x"], inputs["h0"]) if "h0" in inputs else module(inputs["x"])
    if not isinstance(result, tuple) or len(result) != 2:
        got = type(result).__name__ + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
        raise CheckFailure("RNN.forward should return a tuple (outputs, h_last), got {got}", got=got)
    return result


def one_step(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"h_t": impl.rnn.rnn_step(inputs["x_t"], inputs["h_prev"], *(inputs[n] for n in PARAMETERS))}


def forward(impl, inputs: dict[str, Tensor]) -> Outputs:
    outputs, h_last = _run(build(impl, inputs), inputs)
    return {"outputs": outputs, "h_last": h_last}


def gradients(impl, inputs: dict[str, Tensor]) -> Outputs:
    """Backpropagate a fixed random weighting of outputs and h_last to x, h0 and every parameter."""
    g = torch.Generator().manual_seed(7)
    module = build(impl, inputs)
    for name in ("x", "h0"):
        inputs[name].requires_grad_(True)
    outputs, h_last = _run(module, inputs)
    if not (isinstance(outputs, Tensor) and isinstance(h_last, Tensor) and outputs.requires_grad):
        raise CheckFailure("no gradient flows back from the outputs: did you detach, use .data, or go through numpy?")
    loss = ((outputs * torch.randn(outputs.shape, generator=g, dtype=outputs.dtype)).sum()
            + (h_last * torch.randn(h_last.shape, generator=g, dtype=h_last.dtype)).sum())
    loss.backward()
    grads = {"grad_x": inputs["x"].grad, "grad_h0": inputs["h0"].grad}
    grads.update({f"grad_{name}": getattr(module, name).grad for name in PARAMETERS})
    missing = [k for k, v in grads.items() if v is None]
    if missing:
        raise CheckFailure("no gradient reached {names}: use h0 and every parameter, in torch operations",
                           names=", ".join(missing))
    return grads


def norms_of_rnn(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"norms": impl.rnn.gradient_norms(build(impl, inputs), inputs["x"])}


def norms_of_linear(impl, inputs: dict[str, Tensor]) -> Outputs:
    """gradient_norms on ``Linear``, a recurrence given here: it tests gradient_norms alone."""
    return {"norms": impl.rnn.gradient_norms(Linear(inputs["mix"], inputs["decay"]), inputs["x"])}


def norms_quietly(impl, inputs: dict[str, Tensor]) -> Outputs:
    """gradient_norms called under torch.no_grad(), as a plot would call it: the norms, their dtype and no graph
    (``norms_requires_grad``), and the caller's x left as it was (values, no grad required, no .grad)."""
    module, x = build(impl, inputs), inputs["x"]
    with torch.no_grad():
        norms = impl.rnn.gradient_norms(module, x)
    return {"norms": norms, "norms_requires_grad": torch.tensor(bool(getattr(norms, "requires_grad", True))),
            "x": x, "x_requires_grad": torch.tensor(x.requires_grad), "x_has_grad": torch.tensor(x.grad is not None)}


def initial_weights(impl, inputs: dict[str, Tensor]) -> Outputs:
    """A fresh RNN's parameters (seeded), judged by ``drawn_as_promised``: from U(-1/√hidden, 1/√hidden); and its
    last state on ``x``, compared with the reference's (drawn the same way), so that the case needs a forward."""
    torch.manual_seed(1)
    module = impl.rnn.RNN(inputs["x"].size(-1), int(inputs["hidden_size"]))
    with torch.no_grad():
        _, h_last = _run(module, inputs)
    return {**{name: getattr(module, name).detach() for name in PARAMETERS}, "h_last": h_last}


def drawn_as_promised(outputs: Outputs, inputs: dict[str, Tensor]) -> dict[str, str]:
    """Every value within the bound b = 1/√hidden, and spread over it: for n draws from U(-b, b) the largest stays
    below (1 - t) b with probability (1 - t/2)^n, so with t = 2 (1 - 1e-6^(1/n)) the largest is above (1 - t) b and
    the smallest below -(1 - t) b but once in a million draws (n = 50: beyond ±0.52 b)."""
    bound = float(inputs["hidden_size"]) ** -0.5
    broken = {}
    for name in PARAMETERS:
        w = outputs[name]
        reach = (1 - 2 * (1 - 1e-6 ** (1 / w.numel()))) * bound
        if not (bool(torch.isfinite(w).all()) and float(w.abs().max()) <= bound * (1 + 1e-6)):
            broken[f"{name}_bound"] = _("{name} has values outside ±1/√hidden_size").format(name=name)
        elif not (float(w.max()) > reach and float(w.min()) < -reach):
            broken[f"{name}_spread"] = _("{name} does not spread over (-1/√hidden_size, 1/√hidden_size)").format(name=name)
    return broken


PROBES = {"step": one_step, "forward": forward, "gradients": gradients, "norms": norms_of_rnn,
          "norms_linear": norms_of_linear, "norms_quietly": norms_quietly, "init": initial_weights}
INIT = {"relation": drawn_as_promised, "free": PARAMETERS}

# ---------------------------------------------------------------- the public cases (11 points)
GRAD = {"rtol": 1e-4, "atol": 1e-7}  # gradient norms shrink fast with distance: compare the small ones too

# PyTorch's ready-made recurrent layers and kernels (fnmatch patterns on the parts of a name).
READY_MADE = {"rnn.py": ["RNN*", "LSTM*", "GRU*", "rnn_tanh*", "rnn_relu*", "lstm*", "gru*", "_VF"]}

CASES = [
    Case("rnn_step: values", 1.0, "step", lambda s: step(s), seed=101,
         about="batch 2, input_size 3, hidden_size 5"),
    Case("rnn_step: square weights", 0.5, "step", lambda s: step(s, batch=4, input_size=4, hidden_size=4),
         seed=102, about="batch, input_size and hidden_size all 4, where untransposed weights still run"),
    Case("RNN: outputs and last state", 1.5, "forward", lambda s: sequence(s), seed=103,
         about="batch 2, seq 6, input_size 3, hidden_size 5, h0 None (zeros)"),
    Case("RNN: a given initial state h0", 1.0, "forward", lambda s: sequence(s, batch=3, seq=5, input_size=4,
                                                                              hidden_size=6, h0=True), seed=104,
         about="h0 (batch, hidden_size) is the state before the first position"),
    Case("RNN: a longer sequence", 0.5, "forward", lambda s: sequence(s, batch=1, seq=30, input_size=2,
                                                                      hidden_size=8), seed=105,
         about="30 positions, one sequence"),
    Case("RNN: square weights", 0.5, "forward", lambda s: sequence(s, seq=5, input_size=4, hidden_size=4, h0=True),
         seed=106, about="input_size = hidden_size = 4, where untransposed weights still run"),
    Case("float64 in, float64 out", 0.5, "forward", lambda s: sequence(s, dtype=torch.float64), seed=107,
         about="the dtype of the inputs is kept", rtol=1e-7, atol=1e-9),
    Case("gradients reach x, h0 and every parameter", 1.0, "gradients", lambda s: sequence(s, seq=4, h0=True),
         seed=108, about="backward through every step"),
    Case("gradient_norms of a linear recurrence", 1.0, "norms_linear", lambda s: linear(s), seed=109,
         about="h_t = 0.7 h_{t-1} + x_t Mᵀ, whose norms are 0.7^(T-t)·‖M‖_F", **GRAD,
         hint="For h_t = 0.7·h_{t-1} + x_t Mᵀ the Jacobian ∂h_T/∂x_t is 0.7^(T-t)·M: the norms must fall "
              "by 0.7 per step back from the last position, and the last one is ‖M‖_F."),
    Case("gradient_norms of your RNN", 1.5, "norms", lambda s: sequence(s, batch=3, seq=12, input_size=3,
                                                                         hidden_size=6), seed=110, **GRAD,
         about="(batch, seq) Frobenius norms of ∂h_T/∂x_t"),
    Case("gradient_norms under torch.no_grad()", 0.5, "norms_quietly",
         lambda s: sequence(s, batch=2, seq=7, input_size=3, hidden_size=4), seed=111, **GRAD,
         about="the norms in x's dtype without a graph, and the caller's x unchanged, not requiring grad",
         hint="gradient_norms turns autograd on for itself (torch.enable_grad, as a context manager) on a leaf of "
              "its own (a detached copy of x that requires grad), so that it works under torch.no_grad() and "
              "leaves x alone."),
    Case("initial weights from U(-1/√hidden, 1/√hidden)", 0.5, "init",
         lambda s: {"x": torch.randn(2, 3, 20, generator=torch.Generator().manual_seed(s)),
                    "hidden_size": torch.tensor(50)}, seed=112, **INIT,
         about="RNN(20, 50): every parameter drawn within ±1/√50 and spread over that range, as torch.nn.RNN"),
    ready_made_case(READY_MADE, 1.0, about="no torch.nn.RNN, RNNCell, LSTM, GRU or their kernels "
                                           "(read from the source, not run)"),
]

# ---------------------------------------------------------------- known mistakes and their messages
MISTAKES = {
    "state_not_carried": "The state is not carried from step to step: every step starts again from h0 (or zeros). "
                         "Pass the state returned by one step as h_prev of the next: h = rnn_step(x[:, t], h, ...).",
    "no_tanh": "The tanh is missing: h_t = tanh(x_t W_ihᵀ + b_ih + h_prev W_hhᵀ + b_hh). Without it the RNN is "
               "linear and its state can grow without bound.",
    "relu_for_tanh": "The step uses ReLU instead of tanh: h_t = tanh(x_t W_ihᵀ + b_ih + h_prev W_hhᵀ + b_hh) (the "
                     "vanilla RNN of torch.nn.RNN, nonlinearity='tanh'), whose states stay within (-1, 1).",
    "sigmoid_for_tanh": "The step uses a sigmoid instead of tanh: the states must be tanh(...), within (-1, 1) and "
                        "centred on 0, not sigmoid(...) within (0, 1).",
    "norms_without_enable_grad": "gradient_norms fails or gives nothing under torch.no_grad(): turn autograd on for "
                                 "the forward and backward passes inside it (torch.enable_grad, a context manager).",
    "norms_change_x": "gradient_norms turns on requires_grad on the caller's x (x.requires_grad_()): differentiate "
                      "with respect to a leaf of your own, a detached copy of x that requires grad.",
    "transposed_weights": "The weights are used without their transpose. They are stored (out, in) like nn.Linear's: "
                          "weight_ih is (hidden_size, input_size), so compute x_t @ weight_ih.T and "
                          "h_prev @ weight_hh.T. (When input_size ≠ hidden_size the untransposed product fails "
                          "with 'mat1 and mat2 shapes cannot be multiplied'; when they are equal it runs and gives "
                          "wrong values.)",
    "bias_twice": "The biases are added twice: h_t = tanh(x_t W_ihᵀ + b_ih + h_prev W_hhᵀ + b_hh) holds each of "
                  "bias_ih and bias_hh once. (Adding them again in forward, or using nn.Linear layers that have "
                  "their own bias and then the bias again, counts them twice.)",
    "step_jacobian": "gradient_norms measures ∂h_t/∂x_t, the effect of each input on the state of its own step. "
                     "Measure ∂h_T/∂x_t: the effect of every x_t on the last state h_T (h_last), which is how far "
                     "back the RNN still remembers.",
    "outputs_sum": "gradient_norms differentiates the sum of all the outputs (every h_t), not the last state: take "
                   "the Jacobian of h_last, the state h_T, with respect to each x_t.",
    "last_state_sum": "gradient_norms takes the gradient of h_last.sum(), one number, so it measures ‖1ᵀ ∂h_T/∂x_t‖, "
                      "which adds up the hidden units before the norm (they can cancel or pile up). Take the Frobenius norm of the whole "
                      "Jacobian: one backward pass per unit j of h_T (h_last[:, j].sum()), squares summed over the "
                      "units and the input features, then the square root.",
}

# Known mistakes recognised by the exception they raise (re.search on "raised <Type>: <message>"): an
# (a x k) @ (m x k) product is a matrix that needed its transpose; autograd.grad under no_grad has no graph.
RAISES = {
    "norms_without_enable_grad": r"element 0 of tensors does not require grad and does not have a grad_fn",
    "transposed_weights": r"mat1 and mat2 shapes cannot be multiplied \(\d+x(\d+) and \d+x\1\)",
}
