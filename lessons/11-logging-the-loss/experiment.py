"""Lesson 11: logging the loss — loss.item(), loss.detach(), or the loss tensor itself.

    losses.append(loss)            # the tensor AND, while autograd is on, its whole graph
    losses.append(loss.item())     # a Python float; waits for the GPU (a sync) every step
    losses.append(loss.detach())   # a 4-byte tensor, no graph, no sync

    total_loss += loss             # the classic trap: every step's graph hangs off one tensor

Keeping the tensor costs GPU memory only while its graph still holds saved tensors: in an
evaluation loop without no_grad, or before backward. After loss.backward() the saved tensors are
freed, but the graph's nodes are not: a kept loss (or a running sum of losses) keeps every node of
every step's graph alive, in host memory. `graph_nodes_kept` counts them.
"""

import torch

from lab.workloads import TrainConfig
from lab.workloads.data import lm_batch
from lab.workloads.models import build_model, lm_loss
from lab.workloads.registry import layout
from lab.workloads.train import make_optimizer


def graph_nodes(kept) -> int:
    """Autograd nodes reachable from the tensors in `kept`: what a logged loss keeps alive."""
    seen, todo = {}, [t.grad_fn for t in kept if isinstance(t, torch.Tensor) and t.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node  # held, so that an id is never reused during the walk
        todo += [n for n, _ in node.next_functions]
    return len(seen)


def record_graph_nodes(run, kept) -> None:
    """The tracked pass's count: the untracked timed pass runs more steps (lab.measure.timing),
    and its metrics would replace this one with another loop's."""
    if run.tracker is not None:
        run.metric("graph_nodes_kept", graph_nodes(kept))


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
    record_graph_nodes(run, losses)


def train_loop(run, log, running_sum: bool = False):
    lay = layout(run.p.layout)
    with run.phase("model", setup=True):
        model = build_model(lay, run.device)
        opt = make_optimizer(model, TrainConfig())
    losses, total_loss = [], 0
    for i in range(run.p.steps):
        with run.phase(f"data {i}", category="inputs", setup=True):
            x, y = lm_batch(lay, run.p.batch, run.p.seq, i, run.device)
        with run.phase(f"forward {i}"):
            loss = lm_loss(model, x, y)
        with run.phase(f"backward {i}"):
            loss.backward()  # frees the saved tensors; the graph's nodes stay while loss lives
            if running_sum:
                total_loss += loss  # a tensor with history: the sum's graph holds every step's
            else:
                losses.append(log(run, loss))
        with run.phase(f"step {i}"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    del loss  # what is left is what the logging kept
    kept = [total_loss] if running_sum else losses
    run.metric("losses_logged", run.p.steps if running_sum else len(losses))
    record_graph_nodes(run, kept)


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


def train_total_loss(run):
    train_loop(run, keep_tensor, running_sum=True)
