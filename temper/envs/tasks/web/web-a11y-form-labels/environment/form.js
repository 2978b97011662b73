function send() {
  const name = document.getElementById("name").value.trim();
  document.getElementById("status").textContent = name ? "Thanks, " + name + "!" : "Please enter your name.";
}
