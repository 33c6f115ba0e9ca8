"""The run loop shared by every agent worker: wakes from JetStream, the thread lease, the inbox."""

from drydock.worker.thread_runner import RunThread, ThreadRunner
from drydock.worker.wake_consumer import WakeConsumer, WakeHandler

__all__ = ["RunThread", "ThreadRunner", "WakeConsumer", "WakeHandler"]
