"""``DeliveryFuture`` and ``LoopRelay``: producer futures completed on another thread, awaited on a loop."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import pytest

from spark_kafka_sink.producer import DeliveryFuture
from spark_kafka_sink.producer.async_delivery import LoopRelay


def test_a_burst_of_completions_wakes_the_loop_once_and_every_await_gets_its_own_outcome() -> None:
    async def main() -> tuple[list[int | BaseException], int]:
        relay = LoopRelay(asyncio.get_running_loop())
        runs = 0
        run = relay._run

        def counted() -> None:
            nonlocal runs
            runs += 1
            run()

        relay._run = counted  # type: ignore[method-assign]
        sources: list[Future[int]] = [Future() for _ in range(1000)]
        waits = [asyncio.ensure_future(_await(DeliveryFuture(s, relay))) for s in sources]
        await asyncio.sleep(0)  # every wait registered

        def complete() -> None:  # as the sender thread completes a batch: all of them, one after another
            for i, source in enumerate(sources):
                if i == 500:
                    source.set_exception(ValueError("record 500 failed"))
                else:
                    source.set_result(i)

        worker = threading.Thread(target=complete)
        worker.start()
        worker.join()  # the loop is held here on purpose: the whole burst is handed over before it runs again
        outcomes = await asyncio.gather(*waits, return_exceptions=True)
        return outcomes, runs

    outcomes, runs = asyncio.run(main())
    assert runs == 1
    assert outcomes[:500] == list(range(500)) and outcomes[501:] == list(range(501, 1000))
    assert isinstance(outcomes[500], ValueError)


async def _await(delivery: DeliveryFuture[int]) -> int:
    return await delivery


def test_a_done_delivery_is_returned_without_the_loop_and_a_pending_one_refuses_result() -> None:
    async def main() -> None:
        relay = LoopRelay(asyncio.get_running_loop())
        source: Future[int] = Future()
        delivery = DeliveryFuture(source, relay)
        with pytest.raises(asyncio.InvalidStateError):
            delivery.result()
        source.set_result(7)
        assert delivery.done() and delivery.result() == 7 and await delivery == 7
        assert not relay._handed and not relay._scheduled  # nothing crossed: it was done when awaited

    asyncio.run(main())
