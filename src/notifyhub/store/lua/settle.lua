-- Make one user's pending copies real now (defer.lua: a long pending list).
-- KEYS: the user's 10. Returns how many oldest notifications a full inbox dropped.
-- Codec: store/codecs.py no ARGV -> an integer; layout tested by test_script_layouts.py.
return settle(inbox(0))
