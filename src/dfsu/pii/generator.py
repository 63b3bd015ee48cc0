"""Offline generator of AI4Privacy-look-alike PII records, and the public entity-swap pool.

Values come from Faker, one generator per locale seeded from the run seed, so the same seed
gives the same file. Spans are exact by construction: the text is assembled piece by piece
and every entity's offsets are recorded as it is appended.
"""

from __future__ import annotations

import datetime
import random
import re
import zlib
from collections.abc import Callable
from pathlib import Path

from faker import Faker

from dfsu.errors import DfsuError
from dfsu.pii.records import PiiRecord, Span

# Each record opens with a reference number and a greeting, so no two records share the
# text before their first entity: "memorizing a record" then has one meaning.
OPENERS = [
    "Ticket #{n}: ",
    "Case {n}. ",
    "[REF-{n}] ",
    "Message {n} - ",
    "Log entry {n}: ",
    "Request {n}. ",
    "Incident {n}: ",
    "Note {n}. ",
]
GREETINGS = [
    "",
    "Hello team. ",
    "Forwarded from the front desk. ",
    "Urgent. ",
    "For the record. ",
    "Automated notice. ",
    "Please review. ",
    "Follow-up. ",
]

# name -> template; {LABEL} marks an entity.
TEMPLATES: dict[str, str] = {
    "login_alert": "Login alert: user {USERNAME} signed in from {IPV4} using {USERAGENT}. "
    "If this was not you, write to {EMAIL}.",
    "support_ticket": "Support request opened by {FIRSTNAME} {LASTNAME} ({EMAIL}). The customer "
    "says the router at {IPV6} drops the connection every night.",
    "billing_charge": "Billing: the card {CREDITCARDNUMBER} of {FIRSTNAME} {LASTNAME} was charged "
    "{AMOUNT} on {DATE}.",
    "refund": "Refund request: send the money to IBAN {IBAN} held by {FIRSTNAME} {LASTNAME}, "
    "account {ACCOUNTNUMBER}.",
    "medical_admission": "Patient {FIRSTNAME} {LASTNAME}, born {DOB}, SSN {SSN}, was admitted "
    "on {DATE} for a routine check.",
    "hr_record": "HR record: {FIRSTNAME} {LASTNAME} joined as {JOBTITLE} on {DATE}; payroll "
    "account {IBAN}.",
    "shipping": "Shipping notice: the parcel for {FIRSTNAME} {LASTNAME} goes to "
    "{BUILDINGNUMBER} {STREET}, {ZIPCODE} {CITY}.",
    "password_reset": "Password reset requested for {USERNAME} from {IPV4}; the link was sent "
    "to {EMAIL}.",
    "call_log": "Call log: {FIRSTNAME} {LASTNAME} called from {PHONENUMBER} about an unpaid "
    "invoice.",
    "server_access": "Server access: {IPV4} requested {URL} with agent {USERAGENT}.",
    "account_update": "Account update: {USERNAME} changed the recovery phone to {PHONENUMBER} "
    "and the e-mail to {EMAIL}.",
    "insurance_claim": "Insurance claim filed by {FIRSTNAME} {LASTNAME} (SSN {SSN}), living at "
    "{STREET} {BUILDINGNUMBER}, {CITY}.",
    "wire_transfer": "Wire transfer of {AMOUNT} from IBAN {IBAN} to account {ACCOUNTNUMBER} "
    "approved on {DATE}.",
    "firewall": "Firewall blocked {IPV6} after repeated attempts against {URL}.",
    "badge": "New employee badge for {FIRSTNAME} {LASTNAME}, {JOBTITLE} at {COMPANYNAME}, "
    "phone {PHONENUMBER}.",
    "delivery_failed": "Delivery failed: nobody was home at {BUILDINGNUMBER} {STREET}, {CITY}. "
    "Call {PHONENUMBER} to rebook.",
    "prescription": "Prescription for {FIRSTNAME} {LASTNAME}, date of birth {DOB}, to be "
    "collected in {CITY} on {DATE}.",
    "fraud_check": "Fraud check: card {CREDITCARDNUMBER} was used from {IPV4} in {CITY}.",
    "subscription": "Subscription renewed for {EMAIL}; the receipt lists card "
    "{CREDITCARDNUMBER} and billing city {CITY}.",
    "device_registry": "Device registered: MAC {MAC} on {IPV4} belongs to {USERNAME}.",
    "meeting_note": "Meeting note: {FIRSTNAME} {LASTNAME} from {COMPANYNAME} can be reached at "
    "{EMAIL} or {PHONENUMBER}.",
    "tax_form": "Tax form: {FIRSTNAME} {LASTNAME}, SSN {SSN}, address {STREET} "
    "{BUILDINGNUMBER}, {ZIPCODE} {CITY}.",
    "chat_transcript": "Chat transcript: {USERNAME} wrote that the app crashes on {USERAGENT}.",
    "loan_application": "Loan application from {FIRSTNAME} {LASTNAME}, born {DOB}, employer "
    "{COMPANYNAME}, IBAN {IBAN}.",
    "security_audit": "Security audit: admin {USERNAME} logged in from {IPV6} at {TIME} on {DATE}.",
    "payment_reminder": "Payment reminder for account {ACCOUNTNUMBER}: {AMOUNT} is due on "
    "{DATE}; questions to {EMAIL}.",
    "profile_page": "Profile page {URL} belongs to {FIRSTNAME} {LASTNAME} ({USERNAME}).",
    "vaccination": "Vaccination record: {FIRSTNAME} {LASTNAME}, born {DOB}, dose given in {CITY} "
    "on {DATE}.",
    "hotel_booking": "Hotel booking under {FIRSTNAME} {LASTNAME}, phone {PHONENUMBER}, card "
    "{CREDITCARDNUMBER}.",
    "vpn_session": "VPN session for {USERNAME}: assigned {IPV4}, gateway {IPV6}.",
    "crypto_withdrawal": "Withdrawal to wallet {BITCOINADDRESS} requested by {USERNAME} from "
    "{IPV4}.",
}

PLACEHOLDER = re.compile(r"\{([A-Z0-9]+)\}")


def _state(fake: Faker) -> str:
    for attr in ("state", "region", "county"):
        if hasattr(fake, attr):
            return getattr(fake, attr)()
    return fake.city()


DATE_RANGE = (datetime.date(2000, 1, 1), datetime.date(2025, 12, 31))
DOB_RANGE = (datetime.date(1935, 1, 1), datetime.date(2007, 12, 31))

# Faker draws these locales' SSNs relative to the clock (pl_PL's PESEL from a birth date in
# 1970..now, sv_SE's personnummer from now minus an age): a value made an hour later is
# another value. Their numbers are built here from a date in the fixed DOB range instead.
CLOCK_SSN = ("pl_PL", "sv_SE")


def _luhn_digit(digits: str) -> str:
    """The Luhn check digit of a digit string (pure)."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return str((10 - total % 10) % 10)


def _ssn(fake: Faker, rng: random.Random) -> str:
    """The locale's national number, never depending on the time it is made."""
    locale = next((x for x in CLOCK_SSN if x in fake.locales), None)
    if locale is None:
        return fake.ssn()
    born = fake.date_between(DOB_RANGE[0], DOB_RANGE[1])
    if locale == "sv_SE":  # YYMMDD-SSSC, C the Luhn digit of YYMMDDSSS
        serial = f"{rng.randrange(1000):03d}"
        return f"{born:%y%m%d}-{serial}{_luhn_digit(f'{born:%y%m%d}{serial}')}"
    # pl_PL PESEL: YYMMDD (month + 20 for the 2000s), 4 digits, the weighted check digit
    month = born.month + (20 if born.year >= 2000 else 0)
    body = f"{born.year % 100:02d}{month:02d}{born.day:02d}" + "".join(
        str(rng.randrange(10)) for _ in range(4)
    )
    weighted = sum(int(c) * w for c, w in zip(body, (1, 3, 7, 9) * 3, strict=False))
    return body + str((10 - weighted % 10) % 10)


VALUE_MAKERS: dict[str, Callable[[Faker, random.Random], str]] = {
    "FIRSTNAME": lambda f, r: f.first_name(),
    "LASTNAME": lambda f, r: f.last_name(),
    "EMAIL": lambda f, r: f.email(),
    "PHONENUMBER": lambda f, r: f.phone_number(),
    "IPV4": lambda f, r: f.ipv4_public(),
    "IPV6": lambda f, r: f.ipv6(),
    "USERAGENT": lambda f, r: f.user_agent(),
    "STREET": lambda f, r: f.street_name(),
    "BUILDINGNUMBER": lambda f, r: f.building_number(),
    "CITY": lambda f, r: f.city(),
    "STATE": lambda f, r: _state(f),
    "ZIPCODE": lambda f, r: f.postcode(),
    "SSN": lambda f, r: _ssn(f, r),
    "IBAN": lambda f, r: f.iban(),
    "CREDITCARDNUMBER": lambda f, r: f.credit_card_number(),
    # Dates come from fixed ranges: Faker's defaults end at today, which would make the
    # generated records depend on the day (and time) they were made.
    "DATE": lambda f, r: f.date_between(DATE_RANGE[0], DATE_RANGE[1]).strftime(
        r.choice(["%Y-%m-%d", "%d/%m/%Y", "%B %d, %Y"])
    ),
    "DOB": lambda f, r: f.date_between(DOB_RANGE[0], DOB_RANGE[1]).strftime("%d/%m/%Y"),
    "TIME": lambda f, r: f"{r.randrange(24):02d}:{r.randrange(60):02d}",
    "URL": lambda f, r: f.url() + f.uri_path(),
    "USERNAME": lambda f, r: f.user_name(),
    "ACCOUNTNUMBER": lambda f, r: f.numerify("#" * r.choice([8, 10, 12])),
    "AMOUNT": lambda f, r: (
        f"{r.choice(['$', '€', '£'])}{r.randint(5, 9999)}.{r.randint(0, 99):02d}"
    ),
    "COMPANYNAME": lambda f, r: f.company(),
    "JOBTITLE": lambda f, r: f.job(),
    "MAC": lambda f, r: f.mac_address(),
    "BITCOINADDRESS": lambda f, r: (
        "bc1q" + f.lexify("?" * 38, letters="023456789acdefghjklmnpqrstuvwxyz")
    ),
}


def template_labels() -> set[str]:
    return {m for t in TEMPLATES.values() for m in PLACEHOLDER.findall(t)}


def _fakers(locales: list[str], seed: int) -> list[tuple[str, Faker]]:
    out = []
    for locale in locales:
        fake = Faker(locale)
        if locale == "it_IT":
            # Faker builds it_IT's city list from a set, so its order (and every seeded draw
            # from it) changes with Python's hash seed: sorted, a seed means one set of values.
            for provider in fake.providers:
                if isinstance(getattr(provider, "cities", None), list):
                    provider.cities.sort()
        # crc32, not hash(): the per-locale seed must not change between processes.
        fake.seed_instance(seed * 1_000_003 + zlib.crc32(locale.encode()))
        out.append((locale, fake))
    return out


def make_value(label: str, fake: Faker, rng: random.Random) -> str:
    value = VALUE_MAKERS[label](fake, rng).strip()
    return " ".join(value.split())  # no newlines or runs of spaces inside an entity


def fill_template(
    template: str, values: Callable[[str], str], opener: str = ""
) -> tuple[str, list[Span]]:
    """Assemble text and exact spans: opener + template with each {LABEL} replaced."""
    parts: list[str] = [opener]
    spans: list[Span] = []
    pos = len(opener)
    last = 0
    for match in PLACEHOLDER.finditer(template):
        literal = template[last : match.start()]
        parts.append(literal)
        pos += len(literal)
        label = match.group(1)
        value = values(label)
        spans.append(Span(value=value, start=pos, end=pos + len(value), label=label))
        parts.append(value)
        pos += len(value)
        last = match.end()
    parts.append(template[last:])
    return "".join(parts), spans


def generate_records(
    n: int,
    seed: int = 0,
    locales: list[str] | None = None,
    id_prefix: str = "pii",
    templates: dict[str, str] | None = None,
    openers: tuple[list[str], list[str]] | None = None,
) -> list[PiiRecord]:
    """n records over all templates (round-robin, shuffled), reproducible for a seed;
    ``templates``: other record shapes (name -> shape) instead of the built-in ones;
    ``openers``: other (openers, greetings) instead of ``OPENERS`` and ``GREETINGS``."""
    locales = locales or ["en_US"]
    templates = templates or TEMPLATES
    opener_list, greetings = openers or (OPENERS, GREETINGS)
    rng = random.Random(seed)
    fakers = _fakers(locales, seed)
    names = list(templates)
    order = [names[i % len(names)] for i in range(n)]
    rng.shuffle(order)
    numbers = rng.sample(range(10_000, 100_000), n)  # distinct reference numbers
    records = []
    for i, name in enumerate(order):
        locale, fake = fakers[rng.randrange(len(fakers))]
        opener = rng.choice(opener_list).format(n=numbers[i]) + rng.choice(greetings)
        text, spans = fill_template(
            templates[name], lambda label, f=fake: make_value(label, f, rng), opener
        )
        records.append(
            PiiRecord(
                id=f"{id_prefix}-{i:05d}",
                text=text,
                spans=spans,
                meta={"template": name, "locale": locale},
            )
        )
    return records


def build_swap_pool(
    private: list[PiiRecord],
    per_label: int,
    seed: int,
    locales: list[str] | None = None,
    labels: set[str] | None = None,
) -> dict[str, list[str]]:
    """Public substitute values per label, disjoint from every private entity value.

    Labels without a generator (e.g. read from a file with an unusual label set) are skipped.
    """
    locales = locales or ["en_US"]
    private_values = {s.value for r in private for s in r.spans}
    wanted = labels if labels is not None else {s.label for r in private for s in r.spans}
    # A seed stream of its own: the pool must not replay the private generator's values.
    rng = random.Random(f"swap-pool-{seed}")
    fakers = _fakers(locales, seed + 7_919_113)
    pool: dict[str, list[str]] = {}
    for label in sorted(wanted):
        if label not in VALUE_MAKERS:
            continue
        values: list[str] = []
        seen: set[str] = set()
        for _ in range(per_label * 50):
            if len(values) >= per_label:
                break
            _, fake = fakers[rng.randrange(len(fakers))]
            value = make_value(label, fake, rng)
            if value in private_values or value in seen:
                continue
            seen.add(value)
            values.append(value)
        pool[label] = values
    return pool


def usable_templates(
    templates: dict[str, str], pool: dict[str, list[str]], setting: str = "swap pool"
) -> dict[str, str]:
    """The templates whose every label the pool holds values for (the one filter the
    inverter, synthesis and the leak meter share); none is a one-line error."""
    usable = {
        name: t
        for name, t in templates.items()
        if all(pool.get(label) for label in PLACEHOLDER.findall(t))
    }
    if not usable:
        raise DfsuError(f"{setting}: the swap pool holds no values for the shapes' labels")
    return usable


def fill_from_pool(
    pool: dict[str, list[str]], n: int, seed: int, templates: dict[str, str] | None = None
) -> list[PiiRecord]:
    """n public PII-like records: template shapes filled with swap-pool values.

    Templates whose labels the pool lacks are skipped. Used for the inverter's training
    texts and as entity-swapped candidates; never touches private values.
    """
    usable = usable_templates(templates if templates is not None else TEMPLATES, pool)
    rng = random.Random(f"pool-fill-{seed}")
    names = sorted(usable)
    records = []
    for i in range(n):
        name = names[i % len(names)]
        opener = rng.choice(OPENERS).format(n=rng.randrange(10_000, 100_000))
        opener += rng.choice(GREETINGS)
        text, spans = fill_template(usable[name], lambda label: rng.choice(pool[label]), opener)
        records.append(PiiRecord(f"public-{i:05d}", text, spans, {"template": name}))
    return records


def generation_templates(path: str) -> dict[str, str]:
    """Record shapes to generate records from: ``load_templates`` of a file whose every slot
    is a label the generator makes values for (an unknown one is an error naming its line)."""
    templates = load_templates(path, None)
    for name, shape in templates.items():
        unknown = sorted(set(PLACEHOLDER.findall(shape)) - set(VALUE_MAKERS))
        if unknown:
            raise DfsuError(
                f"{path}: {name.replace('line', 'line ')}: no generator for "
                f"{', '.join(unknown)} (known: {', '.join(sorted(VALUE_MAKERS))})"
            )
    return templates


def load_templates(path: str | None, pii_types: list[str] | None) -> dict[str, str]:
    """Record shapes: a user's file (one shape per line, {LABEL} slots) or the built-in ones."""
    if path:
        from dfsu.components.inputs import text_lines

        p = Path(path)
        templates = {}
        for number, line in text_lines(p, "template file", "record shape"):
            if not PLACEHOLDER.search(line):
                raise DfsuError(f"{p}: line {number}: no {{LABEL}} slot in the shape")
            templates[f"line{number}"] = line.strip()
    else:
        templates = dict(TEMPLATES)
    if pii_types:
        wanted = {t.strip().upper() for t in pii_types}
        templates = {k: v for k, v in templates.items() if wanted & set(PLACEHOLDER.findall(v))}
    if not templates:
        raise DfsuError("synthesis: no record shape holds the requested PII types")
    return templates
