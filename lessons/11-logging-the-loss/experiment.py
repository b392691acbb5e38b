"""Lesson 11: logging the loss — loss.item(), loss.detach(), or the loss tensor itself.

    losses.append(loss)            # the tensor AND, while autograd is on, its whole graph
    losses.append(loss.item())     # a Python float; waits for the GPU (a sync) every step
    losses.append(loss.detach())   # a 4-byte tensor, no graph, no sync

Keeping the tensor costs memory only while it still holds a graph: in an evaluation loop without
no_grad, or before backward. After loss.backward() the graph is already freed.
"""

from lab.workloads import TrainConfig
from lab.workloads.data import lm_batch
from lab.workloads.models import build_model, lm_loss
from lab.workloads.registry import layout
from lab.workloads.train import make_optimizer


def eval_loop(run, log):
    lay = layout(run.p.layout)
    with run.phase("model", setup=True):
        model = build_model(lay, run.device).eval()  # autograd is still on (see lesson 07)
    losses = []
    for i in range(run.p.steps):
        with run.phase(f"data {i}", category="inputs", setup=True):
            x, y = lm_batch(lay, run.p.batch, run.p.seq, i, run.device, split="eval")
        with run.phase(f"eval {i}"):
            loss = lm_loss(model, x, y)
            losses.append(log(run, loss))
    run.metric("losses_logged", len(losses))


def train_loop(run, log):
    lay = layout(run.p.layout)
    with run.phase("model", setup=True):
        model = build_model(lay, run.device)
        opt = make_optimizer(model, TrainConfig())
    losses = []
    for i in range(run.p.steps):
        with run.phase(f"data {i}", category="inputs", setup=True):
            x, y = lm_batch(lay, run.p.batch, run.p.seq, i, run.device)
        with run.phase(f"forward {i}"):
            loss = lm_loss(model, x, y)
        with run.phase(f"backward {i}"):
            loss.backward()  # frees the graph: the loss tensor is 4 bytes again
            losses.append(log(run, loss))
        with run.phase(f"step {i}"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    run.metric("losses_logged", len(losses))


def keep_tensor(run, loss):
    return loss


def item(run, loss):
    return run.item(loss)  # loss.item(); None in simulation, where tensors have no values


def detach(run, loss):
    return loss.detach()


def baseline(run):
    eval_loop(run, keep_tensor)


def eval_item(run):
    eval_loop(run, item)


def eval_detach(run):
    eval_loop(run, detach)


def train_keep_tensor(run):
    train_loop(run, keep_tensor)


def train_item(run):
    train_loop(run, item)
