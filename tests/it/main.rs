mod ops;
