-- A task's calendar (the config's `calendar`, with the named calendars it refers to merged in):
-- the stored form of `scheduler::schedule::TaskCalendar`, JSON, written by the reconciler beside
-- the cron and zone so every node applies the same one; NULL for a task without a calendar.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_tasks ADD COLUMN calendar TEXT;
