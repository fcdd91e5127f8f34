-- wrk -s: each connection waits 1 ms (wrk's timers are whole
-- milliseconds) after a response before its next request.
function delay() return 1 end
