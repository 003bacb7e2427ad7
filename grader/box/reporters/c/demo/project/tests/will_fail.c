int main(void) { return 1; }   /* WILL_FAIL: a non-zero exit is this test's success */
