//! `reservation-model`: checks the reservation protocol's model.

fn main() {
    eprintln!("reservation-model: the model is not built yet");
    std::process::exit(2);
}
