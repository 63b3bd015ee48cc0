"""The text the tagger's training records are made of: the locales, the sentence shapes
(trained on, and held out), the field names of key-value forms, values for labels the record
generator has no maker for, invented names and handles (from syllable inventories) and the cue
words before scattered entities. ``data`` builds the records from these.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from faker import Faker

TAGGER_LOCALES = [
    "en_US",
    "en_GB",
    "de_DE",
    "fr_FR",
    "es_ES",
    "it_IT",
    "nl_NL",
    "pl_PL",
    "sv_SE",
    "pt_BR",
]

# Shapes written for the tagger (training only), in other phrasings than the record shapes.
TRAIN_SHAPES = [
    "Dear {FIRSTNAME} {LASTNAME}, your order ships to {BUILDINGNUMBER} {STREET}, {CITY}.",
    "Hi {FIRSTNAME}, please confirm your new password {PASSWORD} by {DATE}.",
    "{FIRSTNAME} {MIDDLENAME} {LASTNAME} was born on {DOB} in {CITY}.",
    "Contact: {PREFIX} {FIRSTNAME} {LASTNAME}, tel. {PHONENUMBER}, mail {EMAIL}",
    "The account of {USERNAME} was locked after a login from {IPV4}.",
    "{USERNAME} posted a comment at {TIME}.",
    "Reply from {USERNAME}: thanks, it works now.",
    "Thanks {FIRSTNAME}! I forwarded your note to {FIRSTNAME} {LASTNAME} in accounting.",
    "Vehicle {VEHICLEVIN} with plate {VEHICLEVRM} is registered to {FIRSTNAME} {LASTNAME}.",
    "Parking fine for plate {VEHICLEVRM} issued on {DATE} in {CITY}.",
    "Please wire {AMOUNT} to {IBAN} (BIC {BIC}) before {DATE}.",
    "The card {CREDITCARDNUMBER}, CVV {CREDITCARDCVV}, issued by {CREDITCARDISSUER}, expired.",
    "Your PIN is {PIN}. Do not share it with anyone.",
    "Employee {FIRSTNAME} {LASTNAME} ({AGE} years) works as {JOBTITLE} in {JOBAREA}.",
    "Send the documents to {SECONDARYADDRESS}, {BUILDINGNUMBER} {STREET}, {ZIPCODE} {CITY}, "
    "{STATE}.",
    "Ethereum deposit from {ETHEREUMADDRESS} confirmed for {USERNAME}.",
    "Litecoin payout to {LITECOINADDRESS} is pending.",
    "Phone IMEI {PHONEIMEI} was reported stolen by {FIRSTNAME} {LASTNAME}.",
    "The courier last saw the parcel near {NEARBYGPSCOORDINATE}.",
    "Patient profile: {SEX}, {AGE} years, eye color {EYECOLOR}, height {HEIGHT}.",
    "Gender: {GENDER}. Date of birth: {DOB}. Name: {FIRSTNAME} {LASTNAME}.",
    "Invoice total {AMOUNT} ({CURRENCYCODE}) paid by {COMPANYNAME}.",
    "We met {FIRSTNAME} at the {COMPANYNAME} office in {CITY} last week.",
    "{LASTNAME}, {FIRSTNAME} - {JOBTITLE} - {PHONENUMBER}",
    "Mr. {LASTNAME} asked whether {FIRSTNAME} could call him back on {PHONENUMBER}.",
    "Ms. {LASTNAME} moved to {STREET} {BUILDINGNUMBER} in {CITY} ({ZIPCODE}).",
    "User {USERNAME} reset the password to {PASSWORD} from {IPV6}.",
    "Error report: {USERAGENT} failed to load {URL} for {USERNAME}.",
    "Signed, {FIRSTNAME} {LASTNAME}, {JOBTITLE}, {COMPANYNAME}",
    "From: {EMAIL} To: {EMAIL} Subject: meeting with {FIRSTNAME} on {DATE}",
    "The masked card {MASKEDNUMBER} belongs to account {ACCOUNTNUMBER}.",
    "Account name {ACCOUNTNAME}, number {ACCOUNTNUMBER}, balance {AMOUNT}.",
    "Head {ORDINALDIRECTION} on {STREET} and stop at number {BUILDINGNUMBER}.",
    "Residents of {COUNTY} county can reach the office at {PHONENUMBER}.",
    "Device {MAC} at {IPV4} was last used by {FIRSTNAME} {LASTNAME}.",
    "Our records show {FIRSTNAME} {LASTNAME}, SSN {SSN}, still owes {AMOUNT}.",
    "Welcome aboard, {FIRSTNAME}! Your username is {USERNAME} and your desk is in {CITY}.",
    "Meeting at {TIME} with {FIRSTNAME} {LASTNAME} and {FIRSTNAME} {LASTNAME}.",
    "Booking confirmed for {FIRSTNAME} {LASTNAME}; arrival {DATE} at {TIME}.",
    "The bank of {FIRSTNAME} {LASTNAME} flagged a transfer of {AMOUNT} to {IBAN}.",
    "The {JOBTITLE} {FIRSTNAME} {LASTNAME} approved the request from {USERNAME}.",
    "Pickup address: {STREET} {BUILDINGNUMBER}, {ZIPCODE} {CITY}. Ask for {FIRSTNAME}.",
    "{FIRSTNAME} wrote: my new number is {PHONENUMBER}, old one was {PHONENUMBER}.",
    "Wallet {BITCOINADDRESS} received {AMOUNT} from {USERNAME}.",
    "Visit {URL} or mail {EMAIL} for help.",
    "Traffic from {IPV4} and {IPV6} was throttled on {DATE}.",
    "The lawyer of {FIRSTNAME} {LASTNAME} filed the claim in {CITY}, {STATE}.",
    "Certificate issued to {FIRSTNAME} {LASTNAME} (ID {SSN}) on {DATE}.",
    "{FIRSTNAME} {LASTNAME} <{EMAIL}> joined the channel as {USERNAME}.",
    "Renewal notice: {COMPANYNAME} will charge card {CREDITCARDNUMBER} on {DATE}.",
    "Please update the record for {LASTNAME} (first name {FIRSTNAME}, born {DOB}).",
    "Alert: new sign-in for {EMAIL} using {USERAGENT} from {IPV4}.",
    "Kind regards, {FIRSTNAME}",
    "Best, {FIRSTNAME} {LASTNAME}",
    "cc: {FIRSTNAME} {LASTNAME}, {FIRSTNAME} {LASTNAME}",
    "Driver {FIRSTNAME} {LASTNAME}, licence plate {VEHICLEVRM}, VIN {VEHICLEVIN}.",
    "Login: {USERNAME} / Password: {PASSWORD}",
    "{USERNAME} joined the server.",
    "thanks {USERNAME} for the fix",
]

# Never trained on: the measure of the tagger on shapes it never saw.
HELDOUT_SHAPES = [
    "A complaint was lodged by {FIRSTNAME} {LASTNAME}, who can be mailed at {EMAIL}.",
    "Records indicate that {FIRSTNAME} {LASTNAME} resides at {BUILDINGNUMBER} {STREET}, "
    "{ZIPCODE} {CITY}.",
    "Reminder: {FIRSTNAME} {LASTNAME} must renew the policy before {DATE}.",
    "The technician traced the outage to {IPV4}; the owner, {USERNAME}, was informed.",
    "Our agent spoke with {FIRSTNAME} {LASTNAME} on {PHONENUMBER} regarding a late payment.",
    "Suspicious purchase on card {CREDITCARDNUMBER} by {FIRSTNAME} {LASTNAME} in {CITY}.",
    "Payroll changed the bank account of {FIRSTNAME} {LASTNAME} to {IBAN}.",
    "Audit trail: {USERNAME} downloaded {URL} at {TIME}.",
    "Enrollment form of {FIRSTNAME} {LASTNAME}: date of birth {DOB}, social security number {SSN}.",
    "The profile of {USERNAME} lists {EMAIL} as a backup address.",
    "Shipment {ACCOUNTNUMBER} for {FIRSTNAME} {LASTNAME} left the depot in {CITY}.",
    "Firmware update pushed to {MAC} ({IPV6}) on behalf of {USERNAME}.",
    "Candidate {FIRSTNAME} {LASTNAME} applied for the {JOBTITLE} position at {COMPANYNAME}.",
    "Transaction of {AMOUNT} flagged: {USERNAME} signed in with {USERAGENT}.",
    "Mail returned: {FIRSTNAME} {LASTNAME} no longer lives on {STREET}.",
    "Chat log: {USERNAME} asked {FIRSTNAME} to check the invoice.",
    "Crypto desk: {FIRSTNAME} {LASTNAME} moved funds to {BITCOINADDRESS}.",
    "New tenant {FIRSTNAME} {LASTNAME} moves into {STREET} {BUILDINGNUMBER} on {DATE}.",
]

# Field names of key-value forms ("Name: ... | Phone: ...").
FORM_FIELDS = {
    "FIRSTNAME": ["First name", "Given name", "Vorname", "Prénom"],
    "LASTNAME": ["Last name", "Surname", "Family name", "Nachname", "Nom"],
    "EMAIL": ["Email", "E-mail", "Mail"],
    "PHONENUMBER": ["Phone", "Tel", "Mobile", "Telefon"],
    "USERNAME": ["Username", "User", "Login", "Handle"],
    "PASSWORD": ["Password", "Pass", "Pwd"],
    "DOB": ["DOB", "Date of birth", "Born"],
    "CITY": ["City", "Town", "Ort"],
    "STREET": ["Street", "Straße", "Rue"],
    "ZIPCODE": ["ZIP", "Postcode", "PLZ"],
    "IBAN": ["IBAN"],
    "SSN": ["SSN", "Social security no."],
    "IPV4": ["IP", "Client IP"],
    "JOBTITLE": ["Position", "Job title", "Role"],
    "COMPANYNAME": ["Company", "Employer", "Firma"],
    "VEHICLEVIN": ["VIN"],
    "VEHICLEVRM": ["Plate", "Registration"],
    "AGE": ["Age"],
}

# Values for the labels the record generator has no maker for.
EXTRA_MAKERS: dict[str, Callable[[Faker, random.Random], str]] = {
    "MIDDLENAME": lambda f, r: f.first_name(),
    "PREFIX": lambda f, r: r.choice(["Mr.", "Mrs.", "Ms.", "Dr.", "Prof.", "Mx."]),
    "PASSWORD": lambda f, r: f.password(length=r.randint(8, 14)),
    "VEHICLEVIN": lambda f, r: f.vin(),
    "VEHICLEVRM": lambda f, r: f.license_plate(),
    "BIC": lambda f, r: f.swift(),
    "CREDITCARDCVV": lambda f, r: f.credit_card_security_code(),
    "CREDITCARDISSUER": lambda f, r: r.choice(
        ["Visa", "Mastercard", "American Express", "Discover", "JCB", "Maestro"]
    ),
    "PIN": lambda f, r: f.numerify("#" * r.choice([4, 4, 6])),
    "AGE": lambda f, r: str(r.randint(18, 95)),
    "JOBAREA": lambda f, r: r.choice(
        ["Marketing", "Finance", "Logistics", "Research", "Sales", "Operations", "Legal"]
    ),
    "SECONDARYADDRESS": lambda f, r: (
        f"{r.choice(['Apt.', 'Suite', 'Flat', 'Unit'])} {r.randint(1, 999)}"
    ),
    "ETHEREUMADDRESS": lambda f, r: "0x" + f.hexify("^" * 40),
    "LITECOINADDRESS": lambda f, r: (
        r.choice("LM")
        + f.lexify("?" * 33, letters="123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz")
    ),
    "PHONEIMEI": lambda f, r: f.numerify("##-######-######-#"),
    "NEARBYGPSCOORDINATE": lambda f, r: f"[{f.latitude():.4f}, {f.longitude():.4f}]",
    "SEX": lambda f, r: r.choice(["male", "female", "Male", "Female"]),
    "GENDER": lambda f, r: r.choice(["Woman", "Man", "Non-binary", "Female", "Male"]),
    "EYECOLOR": lambda f, r: r.choice(["blue", "brown", "green", "hazel", "grey", "amber"]),
    "HEIGHT": lambda f, r: r.choice([f"{r.randint(150, 205)} cm", f"{r.randint(4, 6)}'"]),
    "CURRENCYCODE": lambda f, r: f.currency_code(),
    "MASKEDNUMBER": lambda f, r: "*" * 12 + f.numerify("####"),
    "ACCOUNTNAME": lambda f, r: r.choice(
        ["Savings Account", "Checking Account", "Business Account", "Personal Loan Account"]
    ),
    "ORDINALDIRECTION": lambda f, r: r.choice(["north", "south", "east", "west", "northeast"]),
    "COUNTY": lambda f, r: r.choice(
        ["Kent", "Essex", "Orange", "Cook", "Dane", "Harris", "Marin", "Surrey"]
    ),
}

# Syllables of invented names. The held-out inventory adds onsets, vowels and codas the
# training one lacks, so its strings are not recombinations the tagger has seen.
_ONSETS = "b br c d dr f g gr h j k kr l m n p pr r s st t tr v w z th".split()
_VOWELS = "a e i o u ai ei ou ia".split()
_CODAS = ["", "", "", "n", "r", "l", "s", "m", "nd", "rt"]
_HELD_ONSETS = _ONSETS + "q qu zh sk gl pl sn x".split()
_HELD_VOWELS = _VOWELS + "ae oa uy eo".split()
_HELD_CODAS = _CODAS + ["x", "k", "ng", "lt", "sk"]


def invented_name(rng: random.Random, heldout: bool = False) -> str:
    onsets, vowels, codas = (
        (_HELD_ONSETS, _HELD_VOWELS, _HELD_CODAS) if heldout else (_ONSETS, _VOWELS, _CODAS)
    )
    syllables = [rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(2, 3))]
    return ("".join(syllables) + rng.choice(codas)).capitalize()


def invented_handle(rng: random.Random, heldout: bool = False) -> str:
    a, b = invented_name(rng, heldout).lower(), invented_name(rng, heldout).lower()
    shape = rng.randrange(6)
    if shape == 0:
        return f"{a}{rng.randint(1, 999)}"
    if shape == 1:
        return f"{a}.{b}"
    if shape == 2:
        return f"{a}_{b}"
    if shape == 3:
        return f"{a[0]}{b}"
    if shape == 4:
        return f"{a}{rng.randint(1950, 2010)}"
    return f"{a}{b}"


# Words that often come right before a value of a label; "" = the value alone (shape only).
CUES: dict[str, list[str]] = {
    "PERSON": [
        "Dear",
        "Patient",
        "contact",
        "by",
        "from",
        "for",
        "with",
        "customer",
        "employee",
        "signed by",
        "according to",
        "ask for",
        "call",
        "thanks",
        "tenant",
        "driver",
        "applicant",
        "owner",
        "colleague",
        "manager",
        "visitor",
        "guest",
        "",
    ],
    "USERNAME": [
        "user",
        "username",
        "login",
        "handle",
        "account",
        "by",
        "admin",
        "member",
        "from",
        "for",
        "to",
        "with",
        "via",
        "logged in as",
        "signed in as",
        "reported by",
        "posted by",
        "assigned to",
        "",
    ],
    "LASTNAME": ["Mr.", "Mrs.", "Ms.", "Dr.", "Prof.", "surname", "family"],
    "FIRSTNAME": [
        "Hi",
        "Hello",
        "Thanks",
        "first name",
        "called",
        "Dear",
        "told",
        "met",
        "helped",
        "thanked",
        "invited",
        "paid",
        "hired",
        "visited",
        "reminded",
        "warned",
        "phoned",
    ],
}
SCATTER_LABELS = [
    "PERSON",
    "PERSON",
    "PERSON",
    "USERNAME",
    "USERNAME",
    "LASTNAME",
    "FIRSTNAME",
    "EMAIL",
    "PHONENUMBER",
    "IPV4",
    "IPV6",
    "MAC",
    "URL",
    "USERAGENT",
    "IBAN",
    "CREDITCARDNUMBER",
    "SSN",
    "DATE",
    "DOB",
    "TIME",
    "AMOUNT",
    "CITY",
    "STREET",
    "ZIPCODE",
    "BUILDINGNUMBER",
    "COMPANYNAME",
    "JOBTITLE",
    "ACCOUNTNUMBER",
    "BITCOINADDRESS",
    "PASSWORD",
    "VEHICLEVIN",
    "VEHICLEVRM",
    "STATE",
]
