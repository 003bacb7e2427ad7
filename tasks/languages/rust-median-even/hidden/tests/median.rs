use stats::median;

#[test]
fn odd_length() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
}
#[test]
fn even_length() {
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
}
