"""Capture and replay: the capture directory's log, its sync and follower, replay, the diff."""
