fn main() {
    println!("infergate");
}
