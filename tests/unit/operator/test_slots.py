"""Run slots: a global bound and a per-namespace bound."""

from __future__ import annotations

import asyncio

from kubenest_operator.shards import ShardGuard
from kubenest_operator.slots import ObjectLocks, RunSlots


async def _scenario():
    slots = RunSlots(total=3, per_namespace=1)
    order = []

    async def run(namespace, name, hold):
        await slots.acquire(namespace)
        order.append(f"start {name}")
        await hold.wait()
        order.append(f"end {name}")
        slots.release(namespace)

    holds = {name: asyncio.Event() for name in ("a1", "a2", "b1", "c1")}
    tasks = [asyncio.create_task(run("a", "a1", holds["a1"])), asyncio.create_task(run("a", "a2", holds["a2"])),
             asyncio.create_task(run("b", "b1", holds["b1"])), asyncio.create_task(run("c", "c1", holds["c1"]))]
    await asyncio.sleep(0.05)
    # a2 waits on its namespace's bound without holding a shared slot: b1 and c1 both got one.
    assert order == ["start a1", "start b1", "start c1"]
    assert slots.busy("a") and slots.busy("d")  # every shared slot is taken now
    holds["b1"].set()
    await asyncio.sleep(0.05)
    assert "start a2" not in order and not slots.busy("b")
    holds["a1"].set()
    await asyncio.sleep(0.05)
    assert order[-1] == "start a2"
    holds["a2"].set()
    holds["c1"].set()
    await asyncio.gather(*tasks)
    assert slots._namespaces == {}  # idle namespaces are forgotten


def test_one_namespace_cannot_take_every_slot():
    asyncio.run(_scenario())


async def _cancelled_waiter_gives_back_its_namespace_slot():
    slots = RunSlots(total=1, per_namespace=1)
    await slots.acquire("a")
    waiter = asyncio.create_task(slots.acquire("b"))  # holds b's own slot, waits for the shared one
    await asyncio.sleep(0.01)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    slots.release("a")
    await asyncio.wait_for(slots.acquire("b"), 1)
    slots.release("b")


def test_a_cancelled_waiter_gives_back_its_namespace_slot():
    asyncio.run(_cancelled_waiter_gives_back_its_namespace_slot())


def test_object_locks_serialise_one_object_and_forget_idle_ones():
    async def scenario():
        locks = ObjectLocks()
        order = []

        async def run(name, tag):
            async with locks.hold("ns", name):
                order.append(f"start {tag}")
                await asyncio.sleep(0.02)
                order.append(f"end {tag}")

        await asyncio.gather(run("vc1", "a"), run("vc1", "b"), run("vc2", "c"))
        assert order.index("end a") < order.index("start b")  # one object: one at a time
        assert order.index("start c") < order.index("end a")  # another object: not held up
        assert not locks._locks and not locks._users

    asyncio.run(scenario())


class _Api:
    """The VirtualCluster as the API holds it (None: gone), and the status patches sent."""

    def __init__(self, objects):
        self.objects, self.patches = objects, []

    async def get_virtualcluster(self, namespace, name):
        from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

        if self.objects.get(name) is None:
            raise KubeApiError("GET x", status=404)
        return self.objects[name]

    async def patch_virtualcluster_status(self, namespace, name, patch):
        self.patches.append((name, patch["status"]))


def test_exclusive_run_takes_the_lock_then_a_slot_and_reads_the_object_afresh():
    from types import SimpleNamespace

    from kubenest_operator.slots import exclusive_run

    api = _Api({"a": {"metadata": {"name": "a", "generation": 3}}, "b": {"metadata": {"name": "b", "generation": 1}}})
    ctx = SimpleNamespace(api=api, slots=RunSlots(total=1, per_namespace=1), locks=ObjectLocks(),
                          shard_guard=ShardGuard())
    order, done = [], asyncio.Event()
    done.set()

    async def run(name, hold, announce=True):
        async with exclusive_run(ctx, "t", name, "Completed", announce=announce) as current:
            order.append((name, current.metadata.get("generation") if current is not None else None))
            await hold.wait()

    async def scenario():
        first = asyncio.Event()
        tasks = [asyncio.create_task(run("a", first))]
        await asyncio.sleep(0.05)
        tasks.append(asyncio.create_task(run("b", done)))  # another object: waits for the slot, and says so
        await asyncio.sleep(0.01)
        tasks.append(asyncio.create_task(run("gone", done, announce=False)))  # no object: says nothing
        await asyncio.sleep(0.01)
        tasks.append(asyncio.create_task(run("a", done)))  # the same object: waits for its lock first
        await asyncio.sleep(0.05)
        assert order == [("a", 3)] and [name for name, _patch in api.patches] == ["b"]
        api.objects["a"] = None  # deleted meanwhile: the second run of a reads that
        first.set()
        await asyncio.gather(*tasks)

    asyncio.run(scenario())
    # The slot goes in the order asked: b and the vanished one were waiting for it before a's lock came free.
    assert order == [("a", 3), ("b", 1), ("gone", None), ("a", None)]
    assert [name for name, _patch in api.patches] == ["b", "a"]
