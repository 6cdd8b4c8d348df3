"""The verify child: runs *inside* the sandbox, re-runs a learner's recorded fine-tuning command with their code.

Copied into the box as ``_verify_child.py`` beside the grading child (``_grader_child.py``, whose
``confine_here`` and capped streams it uses) and started as ``python -I -S _verify_child.py``. The job
(``verify.json``) holds the command's options; the box holds the train split's reviews (``train.json``,
text and label) and nothing of valid or test: the corpus package itself is hidden from the box
(grading/verify.py), so the learner's code can train on nothing else. It runs under bubblewrap only: the
rlimits fallback could hide nothing.

It calls the instructor's ``course_lib.provided.capstone.stages.finetune`` as ``course capstone finetune``
would, with the corpus replaced by the train reviews and the training loop's evaluation replaced by a
send: at every evaluation step the model's weights go to the grader, one frame each ({"kind": "weights",
"step": int, "state": {name: tensor}}, frame index = the evaluation's number). The grader picks the best
on valid and scores it on test itself, with the reference classifier (grading/verify.py); nothing this
process says about accuracy exists, let alone counts. Training stops after the last step (no summary, no
baselines: they need valid and test).
"""
from __future__ import annotations

import json
import os
import sys

class _Done(Exception):
    """Raised after the training loop's last step: the rest of ``finetune`` needs valid and test."""


def run(box: str) -> int:
    with open(os.path.join(box, "verify.json"), encoding="utf-8") as fh:
        job = json.load(fh)
    sys.path[:0] = [box, job["site_packages"]]
    import _grader_child as child

    sys.stdout = child._CappedStream(1, job["output_cap"])
    sys.stderr = child._CappedStream(2, job["output_cap"])
    import torch

    from course_lib.provided.capstone import data, run as capstone, stages

    send = child._sender(int(os.environ["COURSE_RESULT_FD"]), torch.save)
    child.MAX_RESULT = job["max_frame"]  # _sender reads it at each send: one frame of weights
    with open(os.path.join(box, "train.json"), encoding="utf-8") as fh:
        train = tuple(data.Review(text, label) for text, label in json.load(fh))
    corpus = data.Corpus(train, (), (), data.CorpusStats(len(train), len(train), 0, len(train), 0, len(train)))
    stages.reviews = lambda: corpus
    args = capstone.parser().parse_args(job["argv"])
    real_train = stages.train

    def train(*positional, evaluate=None, **options):  # noqa: ANN001, ANN202 - stages.train's signature
        config = positional[3]
        steps = [s for s in range(1, config.steps + 1) if config.eval_every and s % config.eval_every == 0
                 or s == config.steps]
        sent = [0]

        def weights(net, device):  # noqa: ANN001, ANN202 - the training loop's evaluate(model, device)
            state = {k: v.detach().to("cpu").clone().contiguous() for k, v in net.state_dict().items()}
            send(sent[0], {"kind": "weights", "step": steps[min(sent[0], len(steps) - 1)], "state": state})
            sent[0] += 1
            return {"sent": float(sent[0])}
        real_train(*positional, evaluate=weights, **options)
        raise _Done

    stages.train = train
    try:
        stages.finetune(args)
    except _Done:
        return 0
    return 3  # finetune returned without training: the grader sees no frames


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import _grader_child

    _grader_child.confine_here(here)
    code = run(here)
    sys.stdout.flush()
    os._exit(code)
