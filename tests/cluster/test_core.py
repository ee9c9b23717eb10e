"""The core scenarios (ingest, stream, resume, expiry, delayed and its retention,
cross-process delivery, topic and preference caches, deferred copies, doorbells carrying
events) against the local Redis Cluster: the integration suite's own tests, collected
here again so they resolve this directory's fixtures (see conftest.py)."""

from __future__ import annotations

from integration.test_announce import (
    deferred,
    test_a_deferred_broadcast_is_announced_by_the_streams_process,
    test_a_deferred_post_is_sent_once,
    test_a_resume_after_a_deferred_announcement_shows_it_once,
    test_with_another_process_listening_the_publisher_hears_its_own_doorbell,
)
from integration.test_cleaner import (
    test_a_copy_delivered_after_the_purge_stays_indexed,
    test_a_pass_takes_at_most_one_batch,
    test_cleaner_removes_expired_copies_and_keeps_later_ones,
)
from integration.test_cross_process import test_stream_on_one_process_gets_post_to_other
from integration.test_deferred_fanout import (
    test_a_pending_copy_reads_as_delivered,
    test_pending_copies_keep_delivery_order,
    test_preferences_apply_to_pending_copies,
    test_the_writer_places_long_pending_lists,
)
from integration.test_delayed import (
    consume_key,
    test_cancel_before_due_and_after_consume,
    test_not_before_due_then_promptly,
    test_priority_among_equally_due,
    test_scheduled_notification_arrives_on_time,
    test_two_movers_never_duplicate_or_lose,
    test_unacked_is_offered_again_after_ttl,
)
from integration.test_delayed_retention import (
    test_a_pass_removes_one_batch_oldest_first,
    test_finished_messages_past_retention_leave_redis_and_postgresql,
    test_one_redis_holds_unfinished_is_kept_and_its_retention_starts_again,
)
from integration.test_fanout_doorbells import (
    log_reads,
    test_a_caught_up_stream_gets_a_fan_out_copy_without_a_log_read,
)
from integration.test_fanouts import (
    test_a_fan_out_is_placed_after_it_starts,
    test_a_stopped_fan_out_is_resumed_after_its_last_batch,
)
from integration.test_inbox_api import (
    test_collapse_key_replaces_in_place,
    test_expired_notifications_vanish_at_once,
    test_groups_fan_out_one_copy_each,
    test_idempotency_key,
    test_paging_with_cursor,
    test_publish_list_get_patch_delete,
    test_read_all_and_bulk,
    test_recall_removes_from_every_inbox,
)
from integration.test_inbox_states import (
    test_a_re_snooze_leaves_one_wake_up_the_new_one,
    test_a_refused_pin_with_a_snooze_leaves_no_wake_up,
    test_unsnooze_and_recall_take_the_wake_up_with_them,
)
from integration.test_inbox_store import (
    test_a_full_inbox_drops_its_oldest,
    test_a_replica_shortfall_still_acknowledges,
    test_retried_fan_out_fills_the_gap_only,
)
from integration.test_routing import (
    test_preferences_push_inbox_and_critical,
    test_rule_push_and_pull_over_live_streams,
    test_topic_cache_equals_postgres_after_random_changes,
)
from integration.test_routing_trace import (
    test_a_deferred_fan_out_traces_what_preferences_dropped_once_placed,
    test_a_trace_names_what_a_full_inbox_evicted,
    test_one_flush_counts_the_streams_of_many_notifications,
    test_traces_written_together_each_read_back_whole,
)
from integration.test_script_layouts import (
    test_defer_then_place_pending,
    test_deliver_answers_its_width_per_user,
    test_read_and_change_scripts,
)
from integration.test_stream import (
    test_gap_older_than_log_gets_reset,
    test_live_notification_update_delete,
    test_per_user_stream_cap,
    test_resume_gets_exactly_the_missed_events,
    test_shutdown_ends_streams_cleanly,
)

__all__ = [
    "consume_key",
    "deferred",
    "log_reads",
    "test_a_caught_up_stream_gets_a_fan_out_copy_without_a_log_read",
    "test_a_copy_delivered_after_the_purge_stays_indexed",
    "test_a_deferred_broadcast_is_announced_by_the_streams_process",
    "test_a_deferred_fan_out_traces_what_preferences_dropped_once_placed",
    "test_a_deferred_post_is_sent_once",
    "test_a_fan_out_is_placed_after_it_starts",
    "test_a_full_inbox_drops_its_oldest",
    "test_a_pass_removes_one_batch_oldest_first",
    "test_a_pass_takes_at_most_one_batch",
    "test_a_pending_copy_reads_as_delivered",
    "test_a_re_snooze_leaves_one_wake_up_the_new_one",
    "test_a_refused_pin_with_a_snooze_leaves_no_wake_up",
    "test_a_replica_shortfall_still_acknowledges",
    "test_a_resume_after_a_deferred_announcement_shows_it_once",
    "test_a_stopped_fan_out_is_resumed_after_its_last_batch",
    "test_a_trace_names_what_a_full_inbox_evicted",
    "test_cancel_before_due_and_after_consume",
    "test_cleaner_removes_expired_copies_and_keeps_later_ones",
    "test_collapse_key_replaces_in_place",
    "test_defer_then_place_pending",
    "test_deliver_answers_its_width_per_user",
    "test_expired_notifications_vanish_at_once",
    "test_finished_messages_past_retention_leave_redis_and_postgresql",
    "test_gap_older_than_log_gets_reset",
    "test_groups_fan_out_one_copy_each",
    "test_idempotency_key",
    "test_live_notification_update_delete",
    "test_not_before_due_then_promptly",
    "test_one_flush_counts_the_streams_of_many_notifications",
    "test_one_redis_holds_unfinished_is_kept_and_its_retention_starts_again",
    "test_paging_with_cursor",
    "test_pending_copies_keep_delivery_order",
    "test_per_user_stream_cap",
    "test_preferences_apply_to_pending_copies",
    "test_preferences_push_inbox_and_critical",
    "test_priority_among_equally_due",
    "test_publish_list_get_patch_delete",
    "test_read_all_and_bulk",
    "test_read_and_change_scripts",
    "test_recall_removes_from_every_inbox",
    "test_resume_gets_exactly_the_missed_events",
    "test_retried_fan_out_fills_the_gap_only",
    "test_rule_push_and_pull_over_live_streams",
    "test_scheduled_notification_arrives_on_time",
    "test_shutdown_ends_streams_cleanly",
    "test_stream_on_one_process_gets_post_to_other",
    "test_the_writer_places_long_pending_lists",
    "test_topic_cache_equals_postgres_after_random_changes",
    "test_traces_written_together_each_read_back_whole",
    "test_two_movers_never_duplicate_or_lose",
    "test_unacked_is_offered_again_after_ttl",
    "test_unsnooze_and_recall_take_the_wake_up_with_them",
    "test_with_another_process_listening_the_publisher_hears_its_own_doorbell",
]
