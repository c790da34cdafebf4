mod redis;
