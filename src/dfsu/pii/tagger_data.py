"""Public synthetic PII for the tagger: many sentence shapes, several locales, invented names,
noisy variants that look like inverted or sampled text, and general text as negatives.

Nothing here reads a run's private records. Three disjoint sets of shapes exist:
- the generator's record shapes and TRAIN_SHAPES (plus generated key-value forms): training;
- HELDOUT_SHAPES: never trained on, to measure the tagger on shapes it never saw.
Invented names and handles come from syllable inventories; the held-out inventory
(``invented_names(..., heldout=True)``) adds sounds the training inventory lacks, and its
strings are checked against every Faker name list of the training locales.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from faker import Faker

from dfsu.pii.generator import PLACEHOLDER, TEMPLATES, VALUE_MAKERS, _fakers
from dfsu.pii.records import PiiRecord, Span

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


def faker_name_lists(locales: list[str]) -> set[str]:
    """Every first and last name Faker knows for the locales (the lists a tagger could learn)."""
    names: set[str] = set()
    for locale in locales:
        fake = Faker(locale)
        for provider in fake.providers:
            for attr in ("first_names", "last_names", "first_names_male", "first_names_female"):
                value = getattr(provider, attr, None)
                if isinstance(value, dict | list | tuple):
                    names.update(value)
    return {n for n in names if isinstance(n, str)}


def _value(
    label: str, fake: Faker, rng: random.Random, invented_share: float, heldout: bool
) -> str:
    if label in ("FIRSTNAME", "LASTNAME", "MIDDLENAME") and rng.random() < invented_share:
        return invented_name(rng, heldout)
    if label == "USERNAME" and rng.random() < invented_share:
        return invented_handle(rng, heldout)
    maker = VALUE_MAKERS.get(label) or EXTRA_MAKERS.get(label)
    value = maker(fake, rng) if maker else invented_name(rng, heldout)
    return " ".join(str(value).split())


# A shape becomes pieces: (literal text, None) or (entity value, LABEL).
Pieces = list[tuple[str, str | None]]


def shape_pieces(shape: str, values: Callable[[str], str]) -> Pieces:
    pieces: Pieces = []
    last = 0
    for match in PLACEHOLDER.finditer(shape):
        pieces.append((shape[last : match.start()], None))
        pieces.append((values(match.group(1)), match.group(1)))
        last = match.end()
    pieces.append((shape[last:], None))
    return [p for p in pieces if p[0]]


def assemble(pieces: Pieces, record_id: str, meta: dict | None = None) -> PiiRecord:
    text, spans, pos = "", [], 0
    for value, label in pieces:
        if label is not None:
            spans.append(Span(value, pos, pos + len(value), label))
        text += value
        pos += len(value)
    return PiiRecord(record_id, text, spans, meta or {})


_WORD = re.compile(r"\S+|\s+")


def add_noise(pieces: Pieces, rng: random.Random, filler: list[str]) -> Pieces:
    """Text that looks inverted or sampled: context words dropped, repeated or replaced,
    a lowercased or truncated record. Entities stay whole (their spans stay exact)."""
    out: Pieces = []
    for value, label in pieces:
        if label is not None:
            out.append((value, label))
            continue
        words = []
        for token in _WORD.findall(value):
            roll = rng.random()
            if token.isspace() or roll > 0.3 or (roll >= 0.1 and not token.isalpha()):
                words.append(token)  # only whole words are repeated or replaced
            elif roll < 0.1:
                continue  # dropped
            elif roll < 0.2:
                words.append(f"{token} {token}")
            else:
                words.append(rng.choice(filler))
        out.append(("".join(words), None))
    if rng.random() < 0.15:
        out = [(v.lower(), lab) if lab is None else (v, lab) for v, lab in out]
    ends = [i for i, (_, lab) in enumerate(out) if lab is not None]
    if ends and rng.random() < 0.4:  # a sample that stops early, after or inside an entity
        last = rng.choice(ends)
        out = out[: last + 1]
        value, label = out[last]
        if len(value) > 4 and rng.random() < 0.5:
            out[last] = (value[: rng.randint(2, len(value) - 1)].rstrip(), label)
    return [p for p in out if p[0]]


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


def _scatter_entity(label: str, value: Callable[[str], str], rng: random.Random) -> Pieces:
    """A cue (or none) and one entity; PERSON is a first name, maybe a middle and a last."""
    if label == "PERSON":
        cue = rng.choice(CUES["PERSON"])
        pieces: Pieces = [(f"{cue} ", None)] if cue else []
        pieces.append((value("FIRSTNAME"), "FIRSTNAME"))
        if rng.random() < 0.1:
            pieces += [(" ", None), (value("MIDDLENAME"), "MIDDLENAME")]
        if rng.random() < 0.85:
            pieces += [(" ", None), (value("LASTNAME"), "LASTNAME")]
        return pieces
    cues = CUES.get(label) or [x.lower() for x in FORM_FIELDS.get(label, [])] + [""]
    cue = rng.choice(cues)
    return ([(f"{cue} ", None)] if cue else []) + [(value(label), label)]


def scatter_record(sentence: str, value: Callable[[str], str], rng: random.Random) -> Pieces:
    """A general-text sentence with one to three entities put between its words."""
    words = sentence.rstrip(".").split(" ")
    slots = sorted(rng.sample(range(len(words) + 1), min(len(words) + 1, rng.randint(1, 3))))
    pieces: Pieces = []
    last = 0
    for slot in slots:
        if slot > last:
            pieces.append((" ".join(words[last:slot]) + " ", None))
        pieces += _scatter_entity(rng.choice(SCATTER_LABELS), value, rng)
        pieces.append((" " if slot < len(words) else "", None))
        last = slot
    pieces.append((" ".join(words[last:]) + ".", None))
    return [p for p in pieces if p[0]]


def _form(labels: list[str], rng: random.Random) -> str:
    sep = rng.choice([" | ", "; ", ", ", "\n", " - "])
    colon = rng.choice([": ", ":", " = ", " "])
    return sep.join(f"{rng.choice(FORM_FIELDS[x])}{colon}{{{x}}}" for x in labels)


def training_shapes(rng: random.Random, n_forms: int = 40) -> list[str]:
    shapes = list(TEMPLATES.values()) + TRAIN_SHAPES
    fields = list(FORM_FIELDS)
    shapes += [_form(rng.sample(fields, rng.randint(2, 5)), rng) for _ in range(n_forms)]
    return shapes


def _openers(rng: random.Random) -> str:
    from dfsu.pii.generator import GREETINGS, OPENERS

    if rng.random() < 0.5:
        return ""
    return rng.choice(OPENERS).format(n=rng.randrange(10_000, 100_000)) + rng.choice(GREETINGS)


def make_records(
    n: int,
    seed: int,
    shapes: list[str],
    locales: list[str] | None = None,
    invented_share: float = 0.3,
    noise_share: float = 0.3,
    heldout: bool = False,
    filler: list[str] | None = None,
    id_prefix: str = "tag",
    sentences: list[str] | None = None,
    scatter_share: float = 0.0,
) -> list[PiiRecord]:
    """n public records over the shapes, values from Faker (several locales) or invented;
    with ``sentences``, a share of them are general sentences with entities scattered in."""
    rng = random.Random(f"tagger-{id_prefix}-{seed}")
    fakers = _fakers(locales or TAGGER_LOCALES, seed + 1_234_567)
    filler = filler or "the a report data was and to of in".split()
    records = []
    for i in range(n):
        _, fake = fakers[rng.randrange(len(fakers))]
        shape = shapes[rng.randrange(len(shapes))]

        def value(label: str, f: Faker = fake) -> str:
            return _value(label, f, rng, invented_share, heldout)

        if sentences and rng.random() < scatter_share:
            pieces = scatter_record(rng.choice(sentences), value, rng)
        else:
            pieces = [(_openers(rng), None)] + shape_pieces(shape, value)
        pieces = [p for p in pieces if p[0]]
        noisy = rng.random() < noise_share
        if noisy:
            pieces = add_noise(pieces, rng, filler)
        records.append(assemble(pieces, f"{id_prefix}-{i:05d}", {"noisy": noisy}))
    return records


def general_negatives(n: int, seed: int) -> list[PiiRecord]:
    """Sentences of generated general text: no PII spans."""
    from dfsu.components.text import generate_documents

    out: list[PiiRecord] = []
    for doc in generate_documents(max(1, n // 4), seed + 99):
        for line in doc.splitlines():
            for sentence in re.split(r"(?<=\.) ", line):
                # "a farmer named Anna": names in general text are not what a tagger unlearns
                if sentence.strip() and " named " not in sentence and len(out) < n:
                    out.append(PiiRecord(f"neg-{len(out):05d}", sentence.strip(), []))
    return out


def invented_eval_records(n: int, seed: int, locales: list[str] | None = None) -> list[PiiRecord]:
    """Held-out shapes filled with invented names and handles only (held-out syllables),
    none of which is in a Faker name list of the training locales."""
    known = {x.lower() for x in faker_name_lists(locales or TAGGER_LOCALES)}
    rng = random.Random(f"invented-eval-{seed}")

    def fresh(make: Callable[[], str]) -> str:
        for _ in range(100):
            value = make()
            if not any(part.lower() in known for part in re.split(r"[._\d]+", value) if part):
                return value
        raise RuntimeError("could not invent a name outside the name lists")

    shapes = [
        s
        for s in HELDOUT_SHAPES
        if {"FIRSTNAME", "LASTNAME", "USERNAME"} & set(PLACEHOLDER.findall(s))
    ]
    fakers = _fakers(locales or TAGGER_LOCALES, seed + 7_654_321)
    records = []
    for i in range(n):
        _, fake = fakers[rng.randrange(len(fakers))]

        def value(label: str, f: Faker = fake) -> str:
            if label in ("FIRSTNAME", "LASTNAME"):
                return fresh(lambda: invented_name(rng, heldout=True))
            if label == "USERNAME":
                return fresh(lambda: invented_handle(rng, heldout=True))
            return _value(label, f, rng, 0.0, True)

        pieces = shape_pieces(shapes[i % len(shapes)], value)
        records.append(assemble(pieces, f"invented-{i:05d}"))
    return records
