"""Timer messages (RocketMQ 5's delivery at an exact time; docs/timer.md): ``book.py`` decides, ``service.py`` does."""

from sievemq.broker.timer.book import TIMER_TOPIC
from sievemq.broker.timer.service import TimerService, TimerSettings, park_for_timer

__all__ = ["TIMER_TOPIC", "TimerService", "TimerSettings", "park_for_timer"]
