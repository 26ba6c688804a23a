fn main() {
    eprintln!("fake-app-server: not implemented yet");
    std::process::exit(2);
}
