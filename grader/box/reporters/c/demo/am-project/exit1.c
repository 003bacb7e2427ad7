int main(void) { return 1; }   /* in XFAIL_TESTS: its failure is its success */
